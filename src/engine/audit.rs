//! Audit annotations and response warnings, recorded as kube-apiserver records them.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Serde for `Arc<str>` fields: the string itself.
mod shared_str {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
        String::deserialize(d).map(Arc::from)
    }
}

/// Audit levels, ordered.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub enum AuditLevel {
    /// No event.
    None,
    /// Metadata only.
    Metadata,
    /// Metadata and request body.
    #[default]
    Request,
    /// Metadata, request and response bodies.
    RequestResponse,
}

impl fmt::Display for AuditLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuditLevel::None => "None",
            AuditLevel::Metadata => "Metadata",
            AuditLevel::Request => "Request",
            AuditLevel::RequestResponse => "RequestResponse",
        })
    }
}

impl FromStr for AuditLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "None" => Ok(AuditLevel::None),
            "Metadata" => Ok(AuditLevel::Metadata),
            "Request" => Ok(AuditLevel::Request),
            "RequestResponse" => Ok(AuditLevel::RequestResponse),
            other => Err(format!(
                "unknown audit level {other:?}: expected None, Metadata, Request or RequestResponse"
            )),
        }
    }
}

/// One audit annotation with the lowest event level that shows it. Key and value are shared:
/// the requests that write the same text (the `mutation.webhook…` keys and values) refer to one
/// copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditAnnotation {
    /// Key, e.g. `mutation.webhook.admission.k8s.io/round_0_index_1`.
    #[serde(with = "shared_str")]
    pub key: Arc<str>,
    /// Value, byte for byte as the apiserver writes it.
    #[serde(with = "shared_str")]
    pub value: Arc<str>,
    /// Lowest audit level at which the annotation is included.
    pub level: AuditLevel,
}

/// The annotations of one request (upstream's `attributesRecord.annotations`).
#[derive(Debug, Clone, Default)]
pub struct Annotations {
    items: Vec<AuditAnnotation>,
}

impl Annotations {
    /// `AddAnnotationWithLevel`: rejects keys that are not `prefix/name` qualified names and
    /// overwrites with a different value or level; the same pair again is a no-op.
    pub fn add(&mut self, key: String, value: String, level: AuditLevel) -> Result<(), String> {
        self.add_indexed(key.into(), value.into(), level)
            .map(|_| ())
            .map_err(|(_, e)| e)
    }

    /// [`Annotations::add`], returning the position of the annotation (the existing one when
    /// the same pair is added again), or the key back with the error.
    pub fn add_indexed(
        &mut self,
        key: Arc<str>,
        value: Arc<str>,
        level: AuditLevel,
    ) -> Result<usize, (String, String)> {
        if let Err(e) = check_key_format(&key) {
            return Err((key.to_string(), e));
        }
        if let Some(i) = self.items.iter().position(|a| a.key == key) {
            let existing = &self.items[i];
            if existing.value != value || existing.level != level {
                let error = format!(
                    "admission annotations are not allowed to be overwritten, key:{:?}, old value: {}, new value: {}",
                    key, existing.value, value
                );
                return Err((key.to_string(), error));
            }
            return Ok(i);
        }
        self.items.push(AuditAnnotation { key, value, level });
        Ok(self.items.len() - 1)
    }

    /// All annotations in the order they were written.
    pub fn all(&self) -> &[AuditAnnotation] {
        &self.items
    }

    /// Consumes the record.
    pub fn into_vec(mut self) -> Vec<AuditAnnotation> {
        self.items.shrink_to_fit();
        self.items
    }
}

/// The annotations an audit event at `level` carries (key → value).
pub fn annotations_at(items: &[AuditAnnotation], level: AuditLevel) -> BTreeMap<String, String> {
    if level == AuditLevel::None {
        return BTreeMap::new();
    }
    items
        .iter()
        .filter(|a| a.level <= level)
        .map(|a| (a.key.to_string(), a.value.to_string()))
        .collect()
}

fn check_key_format(key: &str) -> Result<(), String> {
    if engine_key(key) {
        return Ok(());
    }
    if key.split('/').count() != 2 {
        return Err("annotation key has invalid format, the right format is a DNS subdomain prefix and '/' and key name. (e.g. 'podsecuritypolicy.admission.k8s.io/admit-policy')".into());
    }
    let msgs = crate::config::validation::is_qualified_name(key);
    if !msgs.is_empty() {
        return Err(format!(
            "annotation key has invalid format {}. A qualified name like 'podsecuritypolicy.admission.k8s.io/admit-policy' is required.",
            msgs.join(",")
        ));
    }
    Ok(())
}

/// Whether `key` is one of the keys the dispatcher writes for every call
/// (`mutation.webhook.admission.k8s.io/round_0_index_2`, `patch.…`): one of their prefixes, a
/// DNS subdomain, and a name of letters, digits and `_` that begins and ends with a letter or
/// digit, at most 63 long, which makes a qualified name without the longer check.
fn engine_key(key: &str) -> bool {
    let name = [
        "mutation.webhook.admission.k8s.io/",
        "patch.webhook.admission.k8s.io/",
    ]
    .iter()
    .find_map(|prefix| key.strip_prefix(prefix));
    let Some(name) = name else {
        return false;
    };
    let b = name.as_bytes();
    (1..=63).contains(&b.len())
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

const TOTAL_RUNE_LIMIT: usize = 4 * 1024;
const ITEM_RUNE_LIMIT: usize = 256;

/// Upstream's warning recorder (`pkg/endpoints/filters/warning.go`): deduplication, header
/// validity and the 4096-rune budget with per-item truncation.
///
/// Each warning's text is held once: the set that deduplicates, the order of arrival and the
/// texts sent share it (a text is copied only when the budget truncates it).
#[derive(Debug, Clone, Default)]
pub struct Warnings {
    recorded: foldhash::HashSet<Arc<str>>,
    ordered: Vec<Arc<str>>,
    headers: Vec<Arc<str>>,
    written: usize,
    truncating: bool,
}

impl Warnings {
    /// Adds one warning text; returns false when it was dropped.
    pub fn add(&mut self, text: &str) -> bool {
        if text.is_empty() || (self.written >= TOTAL_RUNE_LIMIT && self.truncating) {
            return false;
        }
        let text: Arc<str> = Arc::from(text);
        if self.recorded.is_empty() {
            // Room for a Pod's usual warnings without growing the set again and again.
            self.recorded.reserve(32);
        }
        if !self.recorded.insert(Arc::clone(&text)) {
            return false;
        }
        self.ordered.push(Arc::clone(&text));
        let (text, runes) = truncate_if(&text, self.truncating);
        if !valid_warning_text(&text) {
            return false;
        }
        if self.written + runes <= TOTAL_RUNE_LIMIT || self.truncating {
            self.written += runes;
            self.headers.push(text);
            return true;
        }
        self.truncating = true;
        self.written = 0;
        self.headers.clear();
        for w in &self.ordered {
            let (t, n) = truncate_if(w, true);
            if valid_warning_text(&t) {
                self.written += n;
                self.headers.push(t);
            }
        }
        true
    }

    /// The warning texts sent to the client, in order.
    pub fn texts(&self) -> impl ExactSizeIterator<Item = &str> {
        self.headers.iter().map(|t| &**t)
    }

    /// The `Warning` header values (`299 - "<text>"`).
    pub fn headers(&self) -> Vec<String> {
        self.texts().map(warning_header).collect()
    }
}

/// The text as sent (truncated to [`ITEM_RUNE_LIMIT`] runes once truncating) and its runes.
fn truncate_if(text: &Arc<str>, truncating: bool) -> (Arc<str>, usize) {
    // Counting runes of ASCII text is its length.
    let runes = if text.is_ascii() {
        text.len()
    } else {
        text.chars().count()
    };
    if truncating && runes > ITEM_RUNE_LIMIT {
        let end = text
            .char_indices()
            .nth(ITEM_RUNE_LIMIT)
            .map_or(text.len(), |(i, _)| i);
        (Arc::from(&text[..end]), ITEM_RUNE_LIMIT)
    } else {
        (Arc::clone(text), runes)
    }
}

/// Whether the text has no control character (Unicode's Cc: U+0000–U+001F, U+007F–U+009F).
fn valid_warning_text(text: &str) -> bool {
    let b = text.as_bytes();
    // Printable ASCII throughout, looked at 16 bytes at a time without stopping early.
    let printable = |chunk: &[u8]| {
        chunk
            .iter()
            .fold(true, |all, c| all & (0x20..0x7f).contains(c))
    };
    if b.chunks(16).all(printable) {
        return true;
    }
    // In UTF-8, U+0080–U+009F are 0xC2 followed by 0x80–0x9F.
    !b.iter().enumerate().any(|(i, &c)| {
        c < 0x20
            || c == 0x7f
            || (c == 0xc2 && b.get(i + 1).is_some_and(|n| (0x80..0xa0).contains(n)))
    })
}

/// `299 - "<text>"` with `"` and `\` escaped.
pub fn warning_header(text: &str) -> String {
    let mut s = String::from("299 - \"");
    for c in text.chars() {
        if c == '"' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_found_as_unicode_defines_them() {
        let samples = [
            "plain",
            "tab\there",
            "del\u{7f}",
            "c1 \u{80} start",
            "c1 \u{9f} end",
            "after c1 \u{a0}",
            "\u{c2}\u{a9} copyright",
            "é, ü, ß",
            "emoji 🙂",
            "\u{2028}",
            "line\nbreak",
            "",
            "\u{1f}",
            "\u{20}",
        ];
        for s in samples {
            assert_eq!(
                valid_warning_text(s),
                !s.chars().any(char::is_control),
                "{s:?}"
            );
        }
        for c in (0..0x800u32).filter_map(char::from_u32) {
            let s = format!("a{c}b");
            assert_eq!(valid_warning_text(&s), !c.is_control(), "{c:?}");
        }
    }

    #[test]
    fn truncation_counts_and_cuts_runes_not_bytes() {
        let text: Arc<str> = Arc::from(format!("{}{}", "é".repeat(200), "x".repeat(100)));
        let (kept, runes) = truncate_if(&text, false);
        assert_eq!((kept.len(), runes), (text.len(), 300));
        let (cut, runes) = truncate_if(&text, true);
        assert_eq!(runes, ITEM_RUNE_LIMIT);
        assert_eq!(
            &*cut,
            text.chars().take(ITEM_RUNE_LIMIT).collect::<String>()
        );
    }

    #[test]
    fn warnings_dedupe_and_drop_control_characters() {
        let mut w = Warnings::default();
        assert!(w.add("a"));
        assert!(!w.add("a"));
        assert!(!w.add(""));
        assert!(!w.add("bad\u{7}"));
        assert!(w.texts().eq(["a"]));
        assert_eq!(warning_header("say \"hi\""), "299 - \"say \\\"hi\\\"\"");
    }

    #[test]
    fn warnings_switch_to_truncation_past_the_budget() {
        let mut w = Warnings::default();
        let long = "x".repeat(3000);
        assert!(w.add(&long));
        assert!(w.add(&"y".repeat(2000)));
        assert_eq!(w.texts().len(), 2);
        assert!(w.texts().all(|t| t.chars().count() == 256));
    }

    #[test]
    fn the_dispatchers_own_keys_are_valid_as_the_full_check_finds() {
        let mut valid = 0;
        for prefix in [
            "mutation.webhook.admission.k8s.io/",
            "patch.webhook.admission.k8s.io/",
            "x.io/",
            "",
        ] {
            for name in [
                "round_0_index_2",
                "round_1_index_12",
                "_a",
                "a_",
                "a",
                "",
                "A_b9",
                "a-b",
                "a.b",
                "a/b",
                "é",
                &"a".repeat(63),
                &"a".repeat(64),
                "round_0_index_2 ",
            ] {
                let key = format!("{prefix}{name}");
                let full = key.split('/').count() == 2
                    && crate::config::validation::is_qualified_name(&key).is_empty();
                if engine_key(&key) {
                    valid += 1;
                    assert!(full, "{key}");
                }
                assert_eq!(check_key_format(&key).is_ok(), full, "{key}");
            }
        }
        assert_eq!(valid, 2 * 5);
    }

    #[test]
    fn annotations_reject_bad_keys_and_overwrites() {
        let mut a = Annotations::default();
        assert!(
            a.add("a.example.com/k".into(), "v".into(), AuditLevel::Metadata)
                .is_ok()
        );
        assert!(
            a.add("a.example.com/k".into(), "v".into(), AuditLevel::Metadata)
                .is_ok()
        );
        assert!(
            a.add("a.example.com/k".into(), "w".into(), AuditLevel::Metadata)
                .is_err()
        );
        assert!(
            a.add("internalErr A/k".into(), "v".into(), AuditLevel::Metadata)
                .is_err()
        );
        assert!(
            a.add("nokey".into(), "v".into(), AuditLevel::Metadata)
                .is_err()
        );
        assert_eq!(a.all().len(), 1);
    }
}
