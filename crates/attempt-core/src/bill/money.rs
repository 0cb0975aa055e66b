//! Amounts as the exports write them, read exactly: a JSON number of
//! dollars (OpenAI, OpenRouter) or a decimal string of cents (Anthropic),
//! never through a binary float. Money is then integer pico-dollars
//! (10^-12) in 128 bits, the unit every sum of the reconciliation adds in.

use std::str::FromStr;

use rust_decimal::{Decimal, RoundingStrategy};

/// Pico-units (10^-12) of a currency per unit.
const PICO_PER_UNIT: i64 = 1_000_000_000_000;

/// What a currency amount is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Whole units (dollars).
    Major,
    /// Hundredths (cents).
    Cents,
}

/// The amount `text` (a decimal, optionally with an exponent: `0.06`,
/// `"123.45"`, `1.5e-05`) in pico-units of its currency. A fraction below
/// a pico-unit is rounded half away from zero: no export carries one.
pub fn pico_units(text: &str, unit: Unit) -> Result<i128, String> {
    let text = text.trim();
    let parsed =
        if text.contains(['e', 'E']) { Decimal::from_scientific(text) } else { Decimal::from_str(text) };
    let value = parsed.map_err(|e| format!("`{text}` is not a decimal amount ({e})"))?;
    let divisor = match unit {
        Unit::Major => 1,
        Unit::Cents => 100,
    };
    let pico = value
        .checked_mul(Decimal::from(PICO_PER_UNIT / divisor))
        .ok_or_else(|| format!("`{text}` is too large an amount"))?
        .round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero);
    i128::try_from(pico).map_err(|_| format!("`{text}` is too large an amount"))
}

/// Pico-units as a decimal number of units, exactly: `1.5` for
/// 1_500_000_000_000, `-0.000000000001` for -1. What JSON money is written as.
pub fn decimal_text(pico: i128) -> String {
    let sign = if pico < 0 { "-" } else { "" };
    let magnitude = pico.unsigned_abs();
    let whole = magnitude / PICO_PER_UNIT as u128;
    let fraction = magnitude % PICO_PER_UNIT as u128;
    if fraction == 0 {
        return format!("{sign}{whole}");
    }
    let digits = format!("{fraction:012}");
    format!("{sign}{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dollars_and_cents_are_read_exactly() {
        assert_eq!(pico_units("0.06", Unit::Major), Ok(60_000_000_000));
        // 0.1 + 0.2 is not 0.3 in binary floats; it is here.
        let sum = pico_units("0.1", Unit::Major).unwrap() + pico_units("0.2", Unit::Major).unwrap();
        assert_eq!(sum, pico_units("0.3", Unit::Major).unwrap());
        // Anthropic: "123.45" in USD is $1.2345.
        assert_eq!(pico_units("123.45", Unit::Cents), Ok(1_234_500_000_000));
        assert_eq!(pico_units("1.5e-05", Unit::Major), Ok(15_000_000));
        assert_eq!(pico_units("-2", Unit::Major), Ok(-2_000_000_000_000));
        assert_eq!(pico_units("0.0000000000005", Unit::Major), Ok(1));
        assert!(pico_units("abc", Unit::Major).unwrap_err().contains("`abc` is not a decimal amount"));
        assert!(pico_units("", Unit::Cents).is_err());
        assert!(pico_units("1e40", Unit::Major).is_err());
    }

    #[test]
    fn decimal_text_writes_every_digit() {
        assert_eq!(decimal_text(0), "0");
        assert_eq!(decimal_text(1_500_000_000_000), "1.5");
        assert_eq!(decimal_text(-1), "-0.000000000001");
        assert_eq!(decimal_text(123_456_789_012_345_678), "123456.789012345678");
    }

    proptest! {
        #[test]
        fn decimal_text_reads_back(pico in -(1i128 << 90)..(1i128 << 90)) {
            let text = decimal_text(pico);
            prop_assert_eq!(pico_units(&text, Unit::Major), Ok(pico));
        }
    }
}
