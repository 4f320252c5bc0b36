//! The errors of `github.com/blang/semver/v4`'s `Parse`, which the Kubernetes `semver()`
//! function returns as they are.

/// `containsOnly(s, numbers)` (true for the empty string, as Go's).
fn digits_only(s: &str) -> bool {
    s.bytes().all(|c| c.is_ascii_digit())
}

/// `hasLeadingZeroes`.
fn leading_zeroes(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

/// `strconv.ParseUint(s, 10, 64)`'s error, if any.
fn parse_uint_error(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some(format!("strconv.ParseUint: parsing {s:?}: invalid syntax"));
    }
    s.parse::<u64>()
        .is_err()
        .then(|| format!("strconv.ParseUint: parsing {s:?}: value out of range"))
}

/// A numeric part (`major`, `minor`, `patch`): its error, if any.
fn number_error(part: &str, which: &str, capital: &str) -> Option<String> {
    if !digits_only(part) {
        return Some(format!(
            "Invalid character(s) found in {which} number {part:?}"
        ));
    }
    if leading_zeroes(part) {
        return Some(format!(
            "{capital} number must not contain leading zeroes {part:?}"
        ));
    }
    parse_uint_error(part)
}

/// `NewPRVersion`'s error, if any.
fn prerelease_error(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("Prerelease is empty".into());
    }
    if digits_only(s) {
        if leading_zeroes(s) {
            return Some(format!(
                "Numeric PreRelease version must not contain leading zeroes {s:?}"
            ));
        }
        return parse_uint_error(s);
    }
    (!s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'))
        .then(|| format!("Invalid character(s) found in prerelease {s:?}"))
}

/// The error `semver.Parse(s)` returns, if any.
pub(super) fn parse_error(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("Version string empty".into());
    }
    let parts: Vec<&str> = s.splitn(3, '.').collect();
    let [major, minor, rest] = parts.as_slice() else {
        return Some("No Major.Minor.Patch elements found".into());
    };
    if let Some(e) = number_error(major, "major", "Major") {
        return Some(e);
    }
    if let Some(e) = number_error(minor, "minor", "Minor") {
        return Some(e);
    }
    let (rest, build) = match rest.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (*rest, None),
    };
    let (patch, prerelease) = match rest.split_once('-') {
        Some((p, pre)) => (p, Some(pre)),
        None => (rest, None),
    };
    if let Some(e) = number_error(patch, "patch", "Patch") {
        return Some(e);
    }
    if let Some(e) = prerelease
        .into_iter()
        .flat_map(|p| p.split('.'))
        .find_map(prerelease_error)
    {
        return Some(e);
    }
    build
        .into_iter()
        .flat_map(|b| b.split('.'))
        .find_map(|part| {
            if part.is_empty() {
                Some("Build meta data is empty".into())
            } else {
                (!part.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'))
                    .then(|| format!("Invalid character(s) found in build meta data {part:?}"))
            }
        })
}

#[cfg(test)]
mod tests {
    use super::parse_error;

    #[test]
    fn blang_parse_errors() {
        let cases = [
            ("1.2.3-beta.1+build.1", None),
            ("v1.0", Some("No Major.Minor.Patch elements found")),
            (
                "v1.0.0",
                Some("Invalid character(s) found in major number \"v1\""),
            ),
            (
                "1.01.0",
                Some("Minor number must not contain leading zeroes \"01\""),
            ),
            ("1.0.0-", Some("Prerelease is empty")),
            ("1.0.0+a..b", Some("Build meta data is empty")),
            ("", Some("Version string empty")),
        ];
        for (input, want) in cases {
            assert_eq!(parse_error(input).as_deref(), want, "{input}");
        }
    }
}
