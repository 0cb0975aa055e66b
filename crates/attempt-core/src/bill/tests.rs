use super::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/it/fixtures/bill/");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}{name}")).unwrap()
}

fn read(source: BillSource, name: &str) -> BillPages {
    read_pages(source, &fixture(name)).unwrap()
}

fn usd(facts: &[BillFact], kind: FactKind) -> i128 {
    facts.iter().filter(|f| f.kind == kind).filter_map(|f| f.amount.as_ref()).map(|m| m.pico).sum()
}

#[test]
fn openai_usage_pages_one_per_line_with_a_partial_first_bucket() {
    let pages = read(BillSource::OpenaiUsage, "openai-usage.json");
    assert_eq!(pages.pages, 2);
    // The first bucket starts at the asked instant, not at midnight; the
    // last is empty and still covered.
    assert_eq!(pages.buckets.len(), 3);
    assert_eq!(pages.buckets[0].start.to_rfc3339(), "2025-07-31T10:37:00+00:00");
    assert_eq!(pages.buckets[2].start.to_rfc3339(), "2025-08-02T00:00:00+00:00");
    let a = pages
        .facts
        .iter()
        .find(|f| f.billing_account.as_deref() == Some("proj_A") && f.tokens.input == Some(9000));
    let a = a.unwrap();
    assert_eq!((a.requests, a.tokens.cached_input, a.tokens.output), (Some(4), Some(200), Some(1300)));
    assert_eq!(
        (a.model.as_deref(), a.service_tier.as_deref()),
        (Some("gpt-4o-mini-2024-07-18"), Some("default"))
    );
}

#[test]
fn openai_costs_are_dollars_read_exactly_and_other_costs_kept_apart() {
    let pages = read(BillSource::OpenaiCosts, "openai-costs.json");
    // 0.00132 + 0.000015 + 0.000702 + 0.00045 + 0.0006, to the pico-dollar.
    assert_eq!(usd(&pages.facts, FactKind::TokenCost), 3_087_000_000);
    assert_eq!(usd(&pages.facts, FactKind::OtherCost), 25_000_000_000);
    let web = pages.facts.iter().find(|f| f.kind == FactKind::OtherCost).unwrap();
    assert_eq!((web.model.as_deref(), web.detail.as_deref()), (None, Some("web search tool calls")));
    assert!(pages.facts.iter().all(|f| f.amount.as_ref().unwrap().currency == "USD"));
}

#[test]
fn anthropic_cost_is_cents_and_usage_input_adds_its_parts() {
    let cost = read(BillSource::AnthropicCost, "anthropic-cost.json");
    // "0.3" + "0.015" + "0.075" + "0.6" cents of tokens: $0.0099.
    assert_eq!(usd(&cost.facts, FactKind::TokenCost), 9_900_000_000);
    // Web search: one cent, no model, apart.
    assert_eq!(usd(&cost.facts, FactKind::OtherCost), 10_000_000_000);
    assert!(cost.facts.iter().all(|f| f.service_tier.as_deref() != Some("priority")));
    let usage = read(BillSource::AnthropicUsage, "anthropic-usage.json");
    let standard = usage.facts.iter().find(|f| f.service_tier.as_deref() == Some("standard")).unwrap();
    assert_eq!(
        standard.tokens,
        Tokens {
            input: Some(1700),
            cached_input: Some(500),
            cache_write_input: Some(200),
            output: Some(400),
            reasoning_output: None,
            cache_write_1h_input: Some(0),
        }
    );
    assert_eq!(standard.requests, None, "Anthropic's usage has no request count");
    assert_eq!((standard.web_search_requests, standard.prompt_over), (Some(1), Some(0)));
    let long = fixture("anthropic-usage.json")
        .replace(r#""context_window": "0-200k"}"#, r#""context_window": "200k-1M"}"#);
    let long = read_pages(BillSource::AnthropicUsage, &long).unwrap();
    assert!(long.facts.iter().any(|f| f.prompt_over == Some(200_000)), "{:?}", long.facts);
    let bad = fixture("anthropic-usage.json")
        .replace(r#""context_window": "0-200k"}"#, r#""context_window": "large"}"#);
    let err = read_pages(BillSource::AnthropicUsage, &bad).unwrap_err();
    assert!(err.contains("`context_window`: `large` is not a range of tokens"), "{err}");
}

#[test]
fn openrouter_activity_is_one_day_per_date() {
    let pages = read(BillSource::OpenrouterActivity, "openrouter-activity.json");
    assert_eq!(pages.buckets.len(), 1);
    assert_eq!(usd(&pages.facts, FactKind::TokenCost), 1_200_000_000);
    let usage = pages.facts.iter().find(|f| f.kind == FactKind::Usage).unwrap();
    assert_eq!((usage.requests, usage.tokens.input, usage.tokens.output), (Some(3), Some(2000), Some(500)));
}

#[test]
fn a_page_of_another_source_is_refused_naming_the_place() {
    let err = read_pages(BillSource::OpenaiUsage, &fixture("openai-costs.json")).unwrap_err();
    assert!(err.contains("page 1: data[0]: results[0] is `organization.costs.result`"), "{err}");
    let err = read_pages(BillSource::AnthropicCost, &fixture("anthropic-usage.json")).unwrap_err();
    assert!(err.starts_with("page 1: missing field `amount`"), "{err}");
    let err = read_pages(BillSource::AnthropicUsage, &fixture("openai-usage.json")).unwrap_err();
    assert!(err.starts_with("page 1:"), "{err}");
    let err =
        read_pages(BillSource::OpenrouterActivity, "{\"data\": [{\"date\": \"08/01/2025\"}]}").unwrap_err();
    assert!(err.starts_with("page 1:"), "{err}");
    assert!(read_pages(BillSource::OpenaiCosts, "  \n").unwrap_err().contains("no page"));
    let err = read_pages(BillSource::OpenaiUsage, "{\"object\": \"page\", \"data\": []} [").unwrap_err();
    assert!(err.starts_with("page 2:"), "{err}");
}

#[test]
fn repeated_pages_count_once_and_contradicting_ones_are_refused() {
    let text = fixture("openai-costs.json");
    let twice = read_pages(BillSource::OpenaiCosts, &format!("{text}\n{text}")).unwrap();
    assert_eq!(twice.pages, 2);
    assert_eq!(twice.facts, read(BillSource::OpenaiCosts, "openai-costs.json").facts);
    let changed = text.replace("0.000702", "0.000703");
    let err = read_pages(BillSource::OpenaiCosts, &format!("{text}\n{changed}")).unwrap_err();
    assert!(err.contains("appears again with other results than on page 1"), "{err}");
    let overlapping = "{\"object\": \"page\", \"data\": [{\"object\": \"bucket\", \"start_time\": 1754010000, \"end_time\": 1754013600, \"results\": []}]}";
    let err = read_pages(BillSource::OpenaiCosts, &format!("{text}\n{overlapping}")).unwrap_err();
    assert!(err.contains("overlaps"), "{err}");
}

#[test]
fn amounts_and_counts_are_checked() {
    let page = |value: &str, currency: &str| {
        format!(
            "{{\"object\": \"page\", \"data\": [{{\"object\": \"bucket\", \"start_time\": 0, \"end_time\": 86400, \"results\": [{{\"object\": \"organization.costs.result\", \"amount\": {{\"value\": {value}, \"currency\": \"{currency}\"}}, \"line_item\": null, \"project_id\": null}}]}}]}}"
        )
    };
    let eur = read_pages(BillSource::OpenaiCosts, &page("12.5", "eur")).unwrap();
    assert_eq!(eur.facts[0].amount, Some(Money { currency: "EUR".into(), pico: 12_500_000_000_000 }));
    assert!(read_pages(BillSource::OpenaiCosts, &page("\"x\"", "usd")).unwrap_err().contains("amount.value"));
    assert!(
        read_pages(BillSource::OpenaiCosts, &page("1", "dollars")).unwrap_err().contains("not a currency")
    );
    let negative = fixture("anthropic-usage.json").replace("\"output_tokens\": 400", "\"output_tokens\": -4");
    assert!(read_pages(BillSource::AnthropicUsage, &negative).unwrap_err().contains("`output_tokens` is -4"));
}
