//! Kubernetes resource quantities ("512Gi", "1.5Ti", "128G") as exact byte counts.
//!
//! The schema already refuses malformed quantities (CEL `isQuantity`); this parser gives the
//! operator the number behind one, so that "1Ti" and "1024Gi" name the same trial and the
//! recommendation can compare memory sizes.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{value:?} is not a Kubernetes quantity (expected a number with an optional suffix such as Gi, Ti, G or T)"
)]
pub struct QuantityError {
    pub value: String,
}

/// Parses a quantity into an integer, rounding fractions up (as Kubernetes does for bytes).
pub fn parse_quantity(value: &str) -> Result<u128, QuantityError> {
    let err = || QuantityError {
        value: value.to_string(),
    };
    let s = value.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    if number.is_empty() || number.starts_with('.') && number.len() == 1 {
        return Err(err());
    }
    let number = number.strip_prefix('+').unwrap_or(number);
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    if !whole.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return Err(err());
    }
    // (multiplier numerator, power of ten divisor) for the suffix
    let multiplier: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        _ => return Err(err()),
    };
    let digits = format!("{whole}{frac}");
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| err())?
    };
    let scale = 10u128.checked_pow(frac.len() as u32).ok_or_else(err)?;
    let scaled = mantissa.checked_mul(multiplier).ok_or_else(err)?;
    Ok(scaled.div_ceil(scale))
}

/// A byte count printed the way people write memory sizes: the largest binary unit that
/// divides it exactly ("1536Gi", not "1.5Ti"), so printed values parse back unchanged.
pub struct Bytes(pub u128);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u32); 6] = [
            ("Ei", 60),
            ("Pi", 50),
            ("Ti", 40),
            ("Gi", 30),
            ("Mi", 20),
            ("Ki", 10),
        ];
        for (unit, shift) in UNITS {
            let size = 1u128 << shift;
            if self.0 >= size && self.0.is_multiple_of(size) && (self.0 / size) < 10_000 {
                return write!(f, "{}{unit}", self.0 / size);
            }
        }
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_and_decimal_suffixes() {
        assert_eq!(parse_quantity("128Gi").unwrap(), 128 << 30);
        assert_eq!(parse_quantity("1Ti").unwrap(), 1 << 40);
        assert_eq!(parse_quantity("1.5Ti").unwrap(), 1536 << 30);
        assert_eq!(parse_quantity("512G").unwrap(), 512_000_000_000);
        assert_eq!(parse_quantity("1024").unwrap(), 1024);
        assert_eq!(parse_quantity("0.5Ki").unwrap(), 512);
    }

    #[test]
    fn equal_sizes_written_differently_parse_equal() {
        assert_eq!(parse_quantity("1Ti"), parse_quantity("1024Gi"));
        assert_eq!(parse_quantity("1536Gi"), parse_quantity("1.5Ti"));
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "Gi", "12GB", "1.2.3Gi", "-1Gi", "abc", "."] {
            assert!(parse_quantity(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn prints_in_the_largest_exact_unit() {
        assert_eq!(Bytes(1536 << 30).to_string(), "1536Gi");
        assert_eq!(Bytes(1 << 40).to_string(), "1Ti");
        assert_eq!(Bytes(128 << 30).to_string(), "128Gi");
        assert_eq!(Bytes(1000).to_string(), "1000");
    }
}
