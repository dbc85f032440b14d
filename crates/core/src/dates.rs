//! Dates, the one home of their parsing and formatting (on `chrono`): calendar days
//! ([`Date`], `YYYY-MM-DD`), RFC 3339 UTC timestamps (`2025-07-14T10:00:00Z`) to and from
//! seconds since the epoch, `[env] exclude_newer`'s instant ([`utc_instant`]), and
//! [`DateBound`], `[select] created_after` and `[[evaluate.model]] cutoff`.
//!
//! A function's `created_at` and `changed_at` are its body's first and last commits' committer
//! dates (`stages::dating`); [`Dates`] is a repository's, at one commit.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Months, NaiveDate, NaiveTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A calendar day (proleptic Gregorian, UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(NaiveDate);

impl Date {
    /// The day `year-month-day`, for constants: a day that does not exist does not compile
    /// (in a `const`) or panics.
    pub const fn ymd(year: i32, month: u32, day: u32) -> Date {
        match NaiveDate::from_ymd_opt(year, month, day) {
            Some(d) => Date(d),
            None => panic!("not a day"),
        }
    }

    /// `YYYY-MM-DD`, a day that exists.
    pub fn parse(text: &str) -> Option<Date> {
        let [y, m, d] = numbers::<3>(text, &[4, 2, 2])?;
        NaiveDate::from_ymd_opt(y as i32, m, d).map(Date)
    }

    /// Days since 1970-01-01.
    pub fn days(self) -> i64 {
        i64::from(self.0.to_epoch_days())
    }

    /// The day `days` after 1970-01-01 (the first or last day chrono has, beyond them).
    pub fn from_days(days: i64) -> Date {
        let day = i32::try_from(days)
            .ok()
            .and_then(NaiveDate::from_epoch_days);
        Date(day.unwrap_or(if days < 0 {
            NaiveDate::MIN
        } else {
            NaiveDate::MAX
        }))
    }

    /// Today, in UTC.
    pub fn today() -> Date {
        Date(Utc::now().date_naive())
    }

    /// Seconds since the epoch at the day's first second (UTC).
    fn midnight(day: NaiveDate) -> i64 {
        day.and_time(NaiveTime::MIN).and_utc().timestamp()
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.format("%Y-%m-%d"))
    }
}

/// `text` as `N` fields of ASCII digits of the given widths joined by `-` (`YYYY-MM-DD`,
/// `YYYY-MM`), read as numbers; `None` for any other shape.
fn numbers<const N: usize>(text: &str, widths: &[usize; N]) -> Option<[u32; N]> {
    let mut out = [0; N];
    let mut fields = text.split('-');
    for (slot, &width) in out.iter_mut().zip(widths) {
        let field = fields.next()?;
        if field.len() != width || !field.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = field.parse().ok()?;
    }
    fields.next().is_none().then_some(out)
}

/// Seconds since the epoch, now.
pub fn now_seconds() -> i64 {
    Utc::now().timestamp()
}

/// Seconds since the epoch as RFC 3339 in UTC, to the second: `2025-07-14T10:00:00Z` (the
/// first or last second chrono has, beyond them).
pub fn rfc3339(secs: i64) -> String {
    let at = DateTime::from_timestamp(secs, 0).unwrap_or(if secs < 0 {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    });
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// An RFC 3339 timestamp (`2024-10-15T08:30:00Z`, `2024-10-15T10:30:00+02:00`, fractions of a
/// second allowed and dropped) as seconds since the epoch. The date and the time are joined by
/// `T` (or `t`), as RFC 3339 has it, not by the space chrono also reads.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    if !matches!(text.as_bytes().get(10), Some(b'T' | b't')) {
        return None;
    }
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp())
}

/// An instant in UTC as RFC 3339 (`2025-06-01T12:00:00Z`, `+00:00` read as `Z`, fractions of
/// a second kept as written) or a date (`2025-06-01`, its midnight), normalized to RFC 3339
/// with `T` and `Z`; `None` when it is neither, not in UTC, or not a real day and time.
pub fn utc_instant(text: &str) -> Option<String> {
    let text = text.trim();
    if let Some(day) = Date::parse(text) {
        return Some(format!("{day}T00:00:00Z"));
    }
    let stamp = text
        .strip_suffix(['Z', 'z'])
        .or_else(|| text.strip_suffix("+00:00"))?;
    parse_rfc3339(text)?;
    // A timestamp that parsed has its date in its first ten bytes and `T` after them.
    Some(format!("{}T{}Z", &stamp[..10], &stamp[11..]))
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
        } else if let Some(day) = Date::parse(text) {
            day.0.succ_opt().map(Date::midnight)
        } else {
            numbers::<2>(text, &[4, 2])
                .and_then(|[y, m]| NaiveDate::from_ymd_opt(y as i32, m, 1))
                .and_then(|first| first.checked_add_months(Months::new(1)))
                .map(Date::midnight)
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
    fn dates_round_trip_and_refuse_days_that_do_not_exist() {
        for text in ["1970-01-01", "2000-02-29", "2024-12-31", "2025-06-01"] {
            let d = Date::parse(text).unwrap();
            assert_eq!(d.to_string(), text);
            assert_eq!(Date::from_days(d.days()), d);
        }
        assert_eq!(Date::parse("1970-01-02").unwrap().days(), 1);
        for bad in [
            "2025-02-29",
            "2025-13-01",
            "2025-6-01",
            "25-06-01",
            "2025-06-01T00",
        ] {
            assert!(Date::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(rfc3339(86_400 + 3_661), "1970-01-02T01:01:01Z");
    }

    #[test]
    fn utc_instants_are_normalized() {
        for (written, normalized) in [
            ("2025-06-01", "2025-06-01T00:00:00Z"),
            ("2024-02-29T23:59:59Z", "2024-02-29T23:59:59Z"),
            ("2025-06-01T12:30:00.5+00:00", "2025-06-01T12:30:00.5Z"),
        ] {
            assert_eq!(
                utc_instant(written).as_deref(),
                Some(normalized),
                "{written}"
            );
        }
        for bad in [
            "2025-6-1",
            "2023-02-29",
            "2025-06-01T25:00:00Z",
            "2025-06-01T12:00:00+02:00",
            "2025-06-01T12:00Z",
            "soon",
        ] {
            assert_eq!(utc_instant(bad), None, "{bad}");
        }
    }

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
