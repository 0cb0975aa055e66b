//! Error-class derivation (docs/record-format.md, "Error classes"): "who owns the failure".
//!
//! Order of evidence: an explicit class from the emitter always wins (the
//! decoder keeps it); otherwise the provider's own `error_code` (so a 429 that
//! says `insufficient_quota` is `quota`, not `rate_limit`), then the HTTP
//! status, then `unknown`. An unrecognised code falls through to the status.

use crate::model::ErrorClass;

/// Derives the class of a failed attempt that did not carry one.
pub fn derive_error_class(error_code: Option<&str>, http_status: Option<i32>) -> ErrorClass {
    error_code
        .and_then(class_of_code)
        .or_else(|| http_status.and_then(class_of_status))
        .unwrap_or(ErrorClass::Unknown)
}

/// Codes arrive as provider codes (`rate_limit_exceeded`), provider error
/// types (`overloaded_error`), exception class names from OpenTelemetry's
/// `error.type` (`openai.RateLimitError`) and finish reasons (`MAX_TOKENS`).
/// Comparing a folded form (last dotted segment, lower case, letters and
/// digits only) lets one table serve all of those spellings.
fn class_of_code(code: &str) -> Option<ErrorClass> {
    use ErrorClass::*;
    let last_segment = code.rsplit(['.', ':', '/']).next().unwrap_or(code);
    let folded: String =
        last_segment.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
    let class = match folded.as_str() {
        // Quota first: these share HTTP 429 with rate limits but no backoff
        // recovers them.
        "insufficientquota"
        | "quotaexceeded"
        | "billinghardlimitreached"
        | "billingnotactive"
        | "spendlimitexceeded"
        | "spendlimitreached"
        | "creditbalancetoolow"
        | "insufficientbalance"
        | "insufficientcredits"
        | "budgetexceeded" => Quota,
        "ratelimitexceeded"
        | "ratelimiterror"
        | "ratelimit"
        | "ratelimited"
        | "toomanyrequests"
        | "throttlingexception"
        | "throttled"
        | "requestslimitexceeded"
        | "tokensratelimitexceeded"
        | "resourceexhausted" => RateLimit,
        "overloaded"
        | "overloadederror"
        | "servererror"
        | "apierror"
        | "internalservererror"
        | "internalerror"
        | "serviceunavailable"
        | "serviceunavailableerror"
        | "serviceunavailableexception"
        | "badgateway"
        | "gatewaytimeout"
        | "apiconnectionerror"
        | "connectionerror"
        | "connectionreset"
        | "econnreset"
        | "econnrefused"
        | "modelnotreadyexception"
        | "unavailable"
        | "internal"
        | "modeloverloaded"
        | "enginoverloaded"
        | "engineoverloaded" => Transient,
        "contextlengthexceeded"
        | "invalidrequesterror"
        | "invalidrequest"
        | "badrequesterror"
        | "badrequest"
        | "notfounderror"
        | "notfound"
        | "modelnotfound"
        | "unprocessableentityerror"
        | "requesttoolarge"
        | "payloadtoolarge"
        | "stringabovemaxlength"
        | "invalidschema"
        | "invalidargument"
        | "validationexception"
        | "invalidparameter"
        | "unsupportedparameter" => Request,
        "authenticationerror"
        | "permissionerror"
        | "permissiondeniederror"
        | "permissiondenied"
        | "invalidapikey"
        | "unauthorized"
        | "unauthenticated"
        | "accessdeniedexception"
        | "forbidden" => Auth,
        "contentfilter"
        | "contentpolicyviolation"
        | "contentfilterfinishreasonerror"
        | "refusal"
        | "safety"
        | "recitation"
        | "prohibitedcontent"
        | "blocklist"
        | "responsibleaipolicyviolation"
        | "policyviolation" => Policy,
        "timeout" | "timeouterror" | "apitimeouterror" | "readtimeout" | "connecttimeout"
        | "deadlineexceeded" | "requesttimeout" | "timedout" => Timeout,
        "streaminterrupted"
        | "incompletestream"
        | "incompleteread"
        | "remoteprotocolerror"
        | "chunkedencodingerror"
        | "streamerror" => StreamInterrupted,
        "length" | "maxtokens" | "lengthfinishreasonerror" | "truncated" => Truncated,
        "invalidoutput"
        | "outputvalidationerror"
        | "jsonvalidatefailed"
        | "schemavalidationfailed"
        | "outputparseerror"
        | "outputparserexception" => InvalidOutput,
        _ => return None,
    };
    Some(class)
}

/// The statuses the error-class table names, plus 408 Request Timeout. Other
/// statuses prove nothing about the cause and derive `unknown`.
fn class_of_status(status: i32) -> Option<ErrorClass> {
    use ErrorClass::*;
    match status {
        500 | 502 | 503 | 504 | 529 => Some(Transient),
        429 => Some(RateLimit),
        // Payment Required: the balance is spent; no backoff recovers it.
        402 => Some(Quota),
        400 | 404 | 413 | 422 => Some(Request),
        401 | 403 => Some(Auth),
        408 => Some(Timeout),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ErrorClass::*;

    #[test]
    fn a_402_and_balance_codes_are_quota_never_rate_limit() {
        assert_eq!(derive_error_class(None, Some(402)), Quota);
        for code in ["insufficient_balance", "billing_hard_limit_reached", "credit_balance_too_low"] {
            assert_eq!(derive_error_class(Some(code), Some(429)), Quota, "{code}");
        }
    }

    #[test]
    fn quota_code_beats_the_429_status() {
        assert_eq!(derive_error_class(Some("insufficient_quota"), Some(429)), Quota);
        assert_eq!(derive_error_class(Some("rate_limit_exceeded"), Some(429)), RateLimit);
        assert_eq!(derive_error_class(None, Some(429)), RateLimit);
    }

    #[test]
    fn code_wins_over_status_and_unknown_codes_fall_through() {
        assert_eq!(derive_error_class(Some("context_length_exceeded"), Some(500)), Request);
        assert_eq!(derive_error_class(Some("something_new"), Some(503)), Transient);
        assert_eq!(derive_error_class(Some("something_new"), None), Unknown);
        assert_eq!(derive_error_class(None, None), Unknown);
    }

    #[test]
    fn statuses_of_the_spec_table() {
        for s in [500, 502, 503, 504, 529] {
            assert_eq!(derive_error_class(None, Some(s)), Transient, "{s}");
        }
        for s in [400, 404, 413, 422] {
            assert_eq!(derive_error_class(None, Some(s)), Request, "{s}");
        }
        assert_eq!(derive_error_class(None, Some(401)), Auth);
        assert_eq!(derive_error_class(None, Some(403)), Auth);
        assert_eq!(derive_error_class(None, Some(418)), Unknown);
    }

    #[test]
    fn exception_class_names_and_provider_types_fold_to_one_spelling() {
        assert_eq!(derive_error_class(Some("openai.RateLimitError"), None), RateLimit);
        assert_eq!(derive_error_class(Some("overloaded_error"), Some(529)), Transient);
        assert_eq!(derive_error_class(Some("anthropic.APITimeoutError"), None), Timeout);
        assert_eq!(derive_error_class(Some("content_filter"), Some(400)), Policy);
        assert_eq!(derive_error_class(Some("MAX_TOKENS"), None), Truncated);
        assert_eq!(derive_error_class(Some("authentication_error"), None), Auth);
    }
}
