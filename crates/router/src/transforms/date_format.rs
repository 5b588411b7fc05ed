//! Java's `SimpleDateFormat` in UTC, as far as topic names and Connect's transforms use it.

/// `TimestampRouter`'s `timestamp.format`: Java's `SimpleDateFormat` in UTC, the pattern
/// letters a topic name takes (`yyyy yy MM M dd d HH H mm m ss s SSS`) and quoted literals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateFormat(Vec<DatePart>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum DatePart {
    Literal(String),
    /// A field and its minimum width.
    Field(char, usize),
}

impl DateFormat {
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    // '' is a quote; 'text' is literal text.
                    let mut text = String::new();
                    if chars.peek() == Some(&'\'') {
                        chars.next();
                        parts.push(DatePart::Literal("'".into()));
                        continue;
                    }
                    loop {
                        match chars.next() {
                            Some('\'') if chars.peek() == Some(&'\'') => {
                                chars.next();
                                text.push('\'');
                            }
                            Some('\'') => break,
                            Some(c) => text.push(c),
                            None => return Err(format!("{pattern:?}: an unclosed quote")),
                        }
                    }
                    parts.push(DatePart::Literal(text));
                }
                'y' | 'M' | 'd' | 'H' | 'm' | 's' | 'S' => {
                    let mut width = 1;
                    while chars.peek() == Some(&c) {
                        chars.next();
                        width += 1;
                    }
                    if c == 'M' && width > 2 {
                        return Err(format!(
                            "{pattern:?}: month names (MMM) are not supported; use MM"
                        ));
                    }
                    parts.push(DatePart::Field(c, width));
                }
                c if c.is_ascii_alphabetic() => {
                    return Err(format!(
                        "{pattern:?}: the pattern letter {c:?} is not supported; outbox-relay formats y, M, d, H, m, s and S"
                    ))
                }
                c => parts.push(DatePart::Literal(c.to_string())),
            }
        }
        Ok(Self(parts))
    }

    /// `millis` since the epoch, in UTC.
    pub fn format(&self, millis: i64) -> String {
        let days = millis.div_euclid(86_400_000);
        let ms_of_day = millis.rem_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        let mut out = String::new();
        for part in &self.0 {
            match part {
                DatePart::Literal(text) => out.push_str(text),
                DatePart::Field(c, width) => {
                    let value = match c {
                        // SimpleDateFormat: `yy` is the year modulo 100, other counts the
                        // whole year padded.
                        'y' if *width == 2 => year.rem_euclid(100),
                        'y' => year,
                        'M' => month as i64,
                        'd' => day as i64,
                        'H' => ms_of_day / 3_600_000,
                        'm' => ms_of_day / 60_000 % 60,
                        's' => ms_of_day / 1000 % 60,
                        _ => ms_of_day % 1000,
                    };
                    out.push_str(&format!("{value:0width$}"));
                }
            }
        }
        out
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// days-to-civil).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
