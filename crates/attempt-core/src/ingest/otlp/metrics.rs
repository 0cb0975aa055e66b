//! OTLP metrics (`POST /v1/metrics`, gRPC `MetricsService/Export`): not
//! stored. Attempts come from spans and logs; a metric aggregates them and
//! cannot be split back into attempts. An SDK configured to export every
//! signal here gets a success, and its data points are counted as ignored.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric::Data};
use prost::Message;

use super::wire::{ProtobufError, each_span};

fn points(metric: &Metric) -> u64 {
    let n = match &metric.data {
        Some(Data::Gauge(g)) => g.data_points.len(),
        Some(Data::Sum(s)) => s.data_points.len(),
        Some(Data::Histogram(h)) => h.data_points.len(),
        Some(Data::ExponentialHistogram(h)) => h.data_points.len(),
        Some(Data::Summary(s)) => s.data_points.len(),
        None => 0,
    };
    n as u64
}

/// The data points of a protobuf `ExportMetricsServiceRequest`, one metric
/// decoded at a time (its envelopes sit at the same tags as a traces
/// export's), checked as strictly as a whole decode.
pub fn data_points_protobuf(body: &[u8]) -> Result<u64, ProtobufError> {
    let mut total = 0u64;
    each_span(body, &mut |bytes| {
        total = total.saturating_add(points(&Metric::decode(bytes)?));
        Ok(())
    })?;
    Ok(total)
}

pub fn data_points(request: &ExportMetricsServiceRequest) -> u64 {
    request.resource_metrics.iter().flat_map(|r| &r.scope_metrics).flat_map(|s| &s.metrics).map(points).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::metrics::v1::{
        Gauge, Histogram, HistogramDataPoint, NumberDataPoint, ResourceMetrics, ScopeMetrics,
    };

    #[test]
    fn points_are_counted_whatever_the_kind_and_a_bad_body_refused() {
        let gauge = Metric {
            name: "g".into(),
            data: Some(Data::Gauge(Gauge { data_points: vec![NumberDataPoint::default(); 3] })),
            ..Default::default()
        };
        let histogram = Metric {
            name: "h".into(),
            data: Some(Data::Histogram(Histogram {
                data_points: vec![HistogramDataPoint::default(); 2],
                ..Default::default()
            })),
            ..Default::default()
        };
        let request = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![gauge, histogram, Metric::default()],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let bytes = request.encode_to_vec();
        assert_eq!(data_points_protobuf(&bytes), Ok(5));
        assert_eq!(data_points(&request), 5);
        assert!(data_points_protobuf(&bytes[..bytes.len() - 2]).is_err());
    }
}
