//! Dates of functions and the bounds a pipeline compares them with: RFC 3339 UTC timestamps
//! (`2025-07-14T10:00:00Z`) to and from seconds since the epoch, with no time library (the
//! proleptic Gregorian calendar of Howard Hinnant's `days_from_civil`), and [`DateBound`],
//! `[select] created_after` and `[[evaluate.model]] cutoff`.
//!
//! A function's `created_at` and `changed_at` are its body's first and last commits' committer
//! dates (`stages::dating`); [`Dates`] is a repository's, at one commit.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Seconds since the epoch as RFC 3339 in UTC, to the second: `2025-07-14T10:00:00Z`.
pub fn rfc3339(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// `YYYY-MM` or `YYYY-MM-DD`: the year, month and day (none for a month), checked.
fn calendar(text: &str) -> Option<(i64, u32, Option<u32>)> {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let mut parts = text.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next());
    if parts.next().is_some() || !digits(y, 4) || !digits(m, 2) {
        return None;
    }
    let (y, m): (i64, u32) = (y.parse().ok()?, m.parse().ok()?);
    if !(1..=12).contains(&m) {
        return None;
    }
    let d = match d {
        None => None,
        Some(d) if digits(d, 2) => {
            let d: u32 = d.parse().ok()?;
            (1..=days_in_month(y, m)).contains(&d).then_some(d)?;
            Some(d)
        }
        Some(_) => return None,
    };
    Some((y, m, d))
}

/// An RFC 3339 timestamp (`2024-10-15T08:30:00Z`, `2024-10-15T10:30:00+02:00`, fractions of a
/// second allowed and dropped) as seconds since the epoch.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let (date, time) = text.split_once(['T', 't'])?;
    let (y, m, Some(d)) = calendar(date)? else {
        return None;
    };
    let (clock, offset) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else {
        let at = time.rfind(['+', '-'])?;
        let (clock, off) = time.split_at(at);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (h, mi) = off[1..].split_once(':')?;
        if h.len() != 2 || mi.len() != 2 {
            return None;
        }
        let (h, mi): (i64, i64) = (h.parse().ok()?, mi.parse().ok()?);
        if h > 23 || mi > 59 {
            return None;
        }
        (clock, sign * (h * 3600 + mi * 60))
    };
    let clock = clock.split_once('.').map_or(clock, |(c, frac)| {
        if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
            ""
        } else {
            c
        }
    });
    let mut hms = clock.split(':');
    let mut field = |max: i64| -> Option<i64> {
        let f = hms.next()?;
        let v: i64 = (f.len() == 2).then(|| f.parse().ok()).flatten()?;
        (v <= max).then_some(v)
    };
    let (h, mi, s) = (field(23)?, field(59)?, field(60)?);
    if hms.next().is_some() {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60 + s - offset)
}

/// A date a function's `created_at` is compared with: a month (`2024-10`), a day
/// (`2024-10-15`) or an RFC 3339 timestamp. A function is after it when it was created on or
/// after [`DateBound::from`]: the first second of the next month, of the next day, or the
/// second after the timestamp. Written (and hashed) as the text it was given.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DateBound {
    text: String,
    from: i64,
}

impl DateBound {
    /// The bound written as `text`, or why it is not one.
    pub fn parse(text: &str) -> Result<DateBound, String> {
        let from = if text.contains(['T', 't']) {
            parse_rfc3339(text).map(|t| t + 1)
        } else {
            calendar(text).map(|(y, m, d)| match d {
                Some(d) => (days_from_civil(y, m, d) + 1) * 86_400,
                None if m == 12 => days_from_civil(y + 1, 1, 1) * 86_400,
                None => days_from_civil(y, m + 1, 1) * 86_400,
            })
        };
        from.map(|from| DateBound {
            text: text.to_owned(),
            from,
        })
        .ok_or_else(|| {
            format!(
                "`{text}` is not a date: write a month (`2024-10`), a day (`2024-10-15`) or an RFC 3339 timestamp (`2024-10-15T08:30:00Z`)"
            )
        })
    }

    /// The first second (since the epoch) that is after the bound.
    pub fn from(&self) -> i64 {
        self.from
    }

    /// The bound as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether a function created at `created_at` (RFC 3339, as records hold it) is after the
    /// bound. A function without a date never is.
    pub fn admits(&self, created_at: Option<&str>) -> bool {
        self.admits_secs(created_at.and_then(parse_rfc3339))
    }

    /// [`DateBound::admits`] of a time in seconds since the epoch.
    pub fn admits_secs(&self, created: Option<i64>) -> bool {
        created.is_some_and(|t| t >= self.from)
    }
}

impl Serialize for DateBound {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for DateBound {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        DateBound::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// When a function's body was first introduced and last changed, in seconds since the epoch
/// (committer dates).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dated {
    pub created: i64,
    pub changed: i64,
}

impl Dated {
    /// `created_at` and `changed_at` as records write them.
    pub fn texts(&self) -> (String, String) {
        (rfc3339(self.created), rfc3339(self.changed))
    }
}

/// A repository's dates at one commit: by a function's place, `path:qualname` (with `#n` for
/// the n-th definition of a name in a file, as its id has it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dates {
    pub by_place: BTreeMap<String, Dated>,
}

impl Dates {
    /// The dates of the function with this id (`REPO:path:qualname`) in repository `repo`.
    pub fn of(&self, id: &str, repo: &str) -> Option<Dated> {
        let place = id.strip_prefix(repo)?.strip_prefix(':')?;
        self.by_place.get(place).copied()
    }

    /// `created_at` and `changed_at` of the function with this id, or both `None`.
    pub fn texts(&self, id: &str, repo: &str) -> (Option<String>, Option<String>) {
        match self.of(id, repo) {
            Some(d) => {
                let (c, ch) = d.texts();
                (Some(c), Some(ch))
            }
            None => (None, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_752_487_200), "2025-07-14T10:00:00Z");
        assert_eq!(parse_rfc3339("2025-07-14T10:00:00Z"), Some(1_752_487_200));
        assert_eq!(
            parse_rfc3339("2025-07-14T12:00:00+02:00"),
            Some(1_752_487_200)
        );
        assert_eq!(
            parse_rfc3339("2025-07-14T10:00:00.25Z"),
            Some(1_752_487_200)
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T23:59:59Z")
                .map(rfc3339)
                .as_deref(),
            Some("2024-02-29T23:59:59Z")
        );
        for bad in [
            "2025-07-14",
            "2025-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2025-07-14T25:00:00Z",
            "2025-07-14T10:00Z",
            "x",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn bounds_start_after_the_month_the_day_or_the_second() {
        let month = DateBound::parse("2024-10").unwrap();
        assert_eq!(rfc3339(month.from()), "2024-11-01T00:00:00Z");
        assert_eq!(
            rfc3339(DateBound::parse("2024-12").unwrap().from()),
            "2025-01-01T00:00:00Z"
        );
        let day = DateBound::parse("2024-10-15").unwrap();
        assert_eq!(rfc3339(day.from()), "2024-10-16T00:00:00Z");
        let stamp = DateBound::parse("2024-10-15T08:30:00Z").unwrap();
        assert_eq!(rfc3339(stamp.from()), "2024-10-15T08:30:01Z");
        assert!(month.admits(Some("2024-11-01T00:00:00Z")));
        assert!(!month.admits(Some("2024-10-31T23:59:59Z")));
        assert!(!month.admits(None));
        for bad in [
            "2024",
            "2024-1",
            "2024-10-32",
            "2024-02-30",
            "yesterday",
            "2024-10-15T8:30:00Z",
        ] {
            assert!(DateBound::parse(bad).is_err(), "{bad}");
        }
    }
}
