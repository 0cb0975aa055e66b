//! OTLP logs (`POST /v1/logs`, gRPC `LogsService/Export`). A log record is
//! kept when it is a breaker state change: named `circuit.state_change` by
//! its `event_name` (or, as older SDKs spell it, an `event.name`
//! attribute), read like the span event of that name (docs/record-format.md,
//! "Breaker timelines"). Every other record is counted as ignored, never an
//! error: an SDK that exports all of its logs here loses nothing it needs,
//! and the export succeeds.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use prost::Message;

use super::super::{Decoded, circuit};
use super::circuit_change_of;
use super::wire::{ProtobufError, each_span};

/// What one export's log records came to.
#[derive(Debug, Default)]
pub struct DecodedLogs {
    /// The state changes kept and the records rejected (named by their
    /// position in the export, from 1).
    pub decoded: Decoded,
    /// Records that are not state changes: counted, not stored.
    pub ignored: u64,
}

/// Whether a record is a breaker state change.
fn is_circuit_change(record: &LogRecord) -> bool {
    record.event_name == circuit::EVENT_NAME
        || record.attributes.iter().any(|kv| {
            kv.key == "event.name"
                && matches!(
                    kv.value.as_ref().and_then(|v| v.value.as_ref()),
                    Some(any_value::Value::StringValue(name)) if name == circuit::EVENT_NAME
                )
        })
}

pub fn decode_request(request: &ExportLogsServiceRequest) -> DecodedLogs {
    let mut out = DecodedLogs::default();
    let records = request.resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records);
    for record in records {
        out.push(record);
    }
    out
}

impl DecodedLogs {
    /// The next record of the export (positions count from 1).
    fn push(&mut self, record: &LogRecord) {
        let position = self.ignored + self.decoded.records + self.decoded.rejected + 1;
        if !is_circuit_change(record) {
            self.ignored += 1;
            return;
        }
        // The time of the change, else when the SDK observed it.
        let time =
            if record.time_unix_nano != 0 { record.time_unix_nano } else { record.observed_time_unix_nano };
        let change =
            circuit_change_of(time, &record.attributes).map_err(|e| format!("log record {position}: {e}"));
        self.decoded.push_circuit(position, change);
    }
}

/// A protobuf `ExportLogsServiceRequest`, one record decoded at a time (the
/// envelopes walked on the wire, as for traces): what it holds is the state
/// changes it keeps, never the whole request's records.
pub fn decode_protobuf(body: &[u8]) -> Result<DecodedLogs, String> {
    let mut out = DecodedLogs::default();
    each_span(body, &mut |bytes| {
        out.push(&LogRecord::decode(bytes)?);
        Ok(())
    })
    .map_err(|e| match e {
        ProtobufError::Undecodable(reason) => {
            format!("undecodable protobuf ExportLogsServiceRequest: {reason}")
        }
        other => other.to_string(),
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
    use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs};

    fn text(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.to_string(),
            value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.to_string())) }),
            ..Default::default()
        }
    }

    fn export(records: Vec<LogRecord>) -> ExportLogsServiceRequest {
        ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                scope_logs: vec![ScopeLogs { log_records: records, ..Default::default() }],
                ..Default::default()
            }],
        }
    }

    const AT: u64 = 1_764_295_032_000_000_000;

    #[test]
    fn state_changes_are_kept_by_either_name_and_the_rest_ignored() {
        let route = || vec![text("attempt.provider", "openai"), text("attempt.model", "gpt-4o")];
        let named = LogRecord {
            time_unix_nano: AT,
            event_name: circuit::EVENT_NAME.to_string(),
            attributes: [route(), vec![text("attempt.state", "open")]].concat(),
            ..Default::default()
        };
        // Older SDKs: the name as an attribute, and only the observed time.
        let attributed = LogRecord {
            observed_time_unix_nano: AT + 1_000_000_000,
            attributes: [
                route(),
                vec![text("event.name", circuit::EVENT_NAME), text("attempt.state", "closed")],
            ]
            .concat(),
            ..Default::default()
        };
        let other = LogRecord {
            time_unix_nano: AT,
            event_name: "gen_ai.client.inference.operation.details".to_string(),
            ..Default::default()
        };
        let plain = LogRecord {
            body: Some(AnyValue { value: Some(any_value::Value::StringValue("hello".into())) }),
            ..Default::default()
        };
        let bytes = export(vec![named, other, attributed, plain]).encode_to_vec();
        let out = decode_protobuf(&bytes).unwrap();
        assert_eq!(out.ignored, 2);
        assert_eq!(out.decoded.rejected, 0);
        let states: Vec<_> = out.decoded.circuits.iter().map(|c| (c.at.timestamp(), c.state)).collect();
        assert_eq!(
            states,
            vec![
                (1_764_295_032, crate::model::Circuit::Open),
                (1_764_295_033, crate::model::Circuit::Closed)
            ]
        );
        assert_eq!(out.decoded.circuits[0].provider, "openai");
    }

    #[test]
    fn the_wire_walk_reads_what_a_whole_decode_reads() {
        let change = |state: &str| LogRecord {
            time_unix_nano: AT,
            event_name: circuit::EVENT_NAME.to_string(),
            attributes: vec![
                text("attempt.provider", "openai"),
                text("attempt.model", "m"),
                text("attempt.state", state),
            ],
            ..Default::default()
        };
        let mut request = export(vec![change("open"), LogRecord::default(), change("shut")]);
        request.resource_logs.push(ResourceLogs {
            scope_logs: vec![
                ScopeLogs { log_records: vec![change("closed")], ..Default::default() },
                ScopeLogs::default(),
            ],
            ..Default::default()
        });
        let whole = decode_request(&request);
        let walked = decode_protobuf(&request.encode_to_vec()).unwrap();
        assert_eq!((walked.ignored, walked.decoded.records, walked.decoded.rejected), (1, 2, 1));
        assert_eq!(walked.decoded.circuits, whole.decoded.circuits);
        assert_eq!(walked.decoded.rejections, whole.decoded.rejections);
        assert_eq!(walked.decoded.rejections[0].line, 3);
        // Cut short, it is refused as prost would refuse it.
        let bytes = request.encode_to_vec();
        assert!(decode_protobuf(&bytes[..bytes.len() - 3]).is_err());
        assert!(ExportLogsServiceRequest::decode(&bytes[..bytes.len() - 3]).is_err());
    }

    #[test]
    fn a_bad_change_is_rejected_by_its_position_and_field() {
        let bad = LogRecord {
            time_unix_nano: AT,
            event_name: circuit::EVENT_NAME.to_string(),
            attributes: vec![
                text("attempt.provider", "openai"),
                text("attempt.model", "m"),
                text("attempt.state", "ajar"),
            ],
            ..Default::default()
        };
        let timeless = LogRecord {
            event_name: circuit::EVENT_NAME.to_string(),
            attributes: vec![text("attempt.route_group", "g"), text("attempt.state", "open")],
            ..Default::default()
        };
        let out = decode_request(&export(vec![LogRecord::default(), bad, timeless]));
        assert_eq!((out.ignored, out.decoded.rejected), (1, 2));
        let reasons: Vec<_> = out.decoded.rejections.iter().map(|r| (r.line, r.reason.as_str())).collect();
        assert_eq!(reasons[0].0, 2);
        assert!(reasons[0].1.starts_with("log record 2: circuit record: state"), "{reasons:?}");
        assert_eq!(reasons[1].0, 3);
        assert!(reasons[1].1.contains("at"), "{reasons:?}");
        assert!(decode_protobuf(b"\xff\xff").unwrap_err().contains("ExportLogsServiceRequest"));
    }
}
