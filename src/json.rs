//! JSON text read as kube-apiserver reads it: nested up to [`MAX_DEPTH`] levels, the limit of
//! the Go decoders the apiserver runs on a request body (sigs.k8s.io/json and Go's
//! `encoding/json` share the scanner constant `maxNestingDepth = 10000`), refused beyond it with
//! their error, `invalid character '{' exceeded max depth`.
//!
//! Every parse of JSON text in hookscope goes through [`from_slice`] or [`from_str`] (a lint
//! forbids `serde_json::from_slice` and `serde_json::from_str` elsewhere). They parse with
//! serde_json's own recursion limit first, so the common, shallow text costs nothing more; only
//! text deeper than that limit is measured (one pass, no recursion) and parsed again without the
//! limit.
//!
//! # Stack
//!
//! Values that deep are walked recursively everywhere (parsing, patches, defaulting, the Go-style
//! encoding, CEL, and dropping a [`serde_json::Value`]), so work on them needs a stack deeper than
//! a thread's default: the command runs on threads of [`STACK_BYTES`] ([`spawn`], and
//! [`STACK_BYTES`] for tokio's workers). The size was measured on objects of [`MAX_DEPTH`] levels
//! through a whole `hookscope replay` of an unoptimised build, which needs more stack than an
//! optimised one: the thread that dispatches used at most 46 MB (a CustomResourceDefinition
//! whose schema nests that deep, decoded into its Go type and defaulted after a patch; a
//! custom resource read by a matchCondition: 44 MB), the reader 16 MB, the outputs 7 MB.

use serde::Deserialize;
use serde_json::de::{Read, SliceRead, StrRead};

/// The deepest nesting a document may have (the outermost object or array counts one), as
/// kube-apiserver decodes a request body.
pub const MAX_DEPTH: usize = 10_000;

/// Stack size of the threads that handle requests and their objects: enough for an object of
/// [`MAX_DEPTH`] levels through parsing, dispatch, the outputs and dropping it, with room to
/// spare (see the module documentation). Reserved address space: only the part used is touched.
pub const STACK_BYTES: usize = 256 << 20;

/// Parses `text` nested up to [`MAX_DEPTH`] levels.
pub fn from_slice<'a, T: Deserialize<'a>>(text: &'a [u8]) -> serde_json::Result<T> {
    from_slice_within(text, 0)
}

/// Parses `text` nested up to [`MAX_DEPTH`] levels.
pub fn from_str<'a, T: Deserialize<'a>>(text: &'a str) -> serde_json::Result<T> {
    from_str_within(text, 0)
}

/// Parses a document that wraps a request body `wrapping` levels deep (an AdmissionReview's
/// `request.object`: 2, an audit event's `requestObject`: 1): it may be nested up to
/// [`MAX_DEPTH`]` + wrapping` levels, so that the body inside it may have [`MAX_DEPTH`].
pub fn from_slice_within<'a, T: Deserialize<'a>>(
    text: &'a [u8],
    wrapping: usize,
) -> serde_json::Result<T> {
    parse(text, wrapping, || SliceRead::new(text))
}

/// [`from_slice_within`] of a string.
pub fn from_str_within<'a, T: Deserialize<'a>>(
    text: &'a str,
    wrapping: usize,
) -> serde_json::Result<T> {
    parse(text.as_bytes(), wrapping, || StrRead::new(text))
}

fn parse<'a, R: Read<'a>, T: Deserialize<'a>>(
    bytes: &[u8],
    wrapping: usize,
    read: impl Fn() -> R,
) -> serde_json::Result<T> {
    match run(serde_json::Deserializer::new(read())) {
        Err(e) if is_recursion_limit(&e) => {}
        done => return done,
    }
    check_depth(bytes, MAX_DEPTH + wrapping)?;
    let mut de = serde_json::Deserializer::new(read());
    de.disable_recursion_limit();
    run(de)
}

fn run<'a, R: Read<'a>, T: Deserialize<'a>>(
    mut de: serde_json::Deserializer<R>,
) -> serde_json::Result<T> {
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Whether `e` is serde_json's own recursion limit (128 levels).
fn is_recursion_limit(e: &serde_json::Error) -> bool {
    e.to_string().starts_with("recursion limit exceeded")
}

/// `Ok` when no object or array in `text` is nested deeper than `limit` levels; else Go's
/// scanner's error at the bracket that goes one level too deep (its line and column, counted
/// as serde_json counts them, so that callers place it as they place serde_json's errors).
pub fn check_depth(text: &[u8], limit: usize) -> serde_json::Result<()> {
    let Some(at) = too_deep(text, limit) else {
        return Ok(());
    };
    let before = &text[..at];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let column = at
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |n| n + 1)
        + 1;
    Err(serde::de::Error::custom(format!(
        "{} at line {line} column {column}",
        depth_error(char::from(text[at]))
    )))
}

/// The bracket of a depth error of this module's parse (the other errors: `None`).
pub fn exceeded_depth(e: &serde_json::Error) -> Option<char> {
    let message = e.to_string();
    let rest = message.strip_prefix("invalid character '")?;
    let mut chars = rest.chars();
    let bracket = chars.next()?;
    chars
        .as_str()
        .starts_with("' exceeded max depth")
        .then_some(bracket)
}

/// Go's scanner's error at `bracket` opening one level more than it reads.
pub fn depth_error(bracket: char) -> String {
    format!("invalid character '{bracket}' exceeded max depth")
}

/// The error of kube-apiserver's decode of an object nested deeper than it reads, `bracket`
/// opening the level too many: the JSON serializer first reads the kind with Go's
/// `encoding/json`, which stops there (the decode of an object a webhook patched).
pub fn decode_depth_error(bracket: char) -> String {
    format!(
        "couldn't get version/kind; json parse error: {}",
        depth_error(bracket)
    )
}

/// Offset of the first `{` or `[` that opens level `limit + 1`, outside strings; `None` when
/// there is none (or the text ends inside a string: the parser reports that).
fn too_deep(text: &[u8], limit: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        match b {
            b'"' => {
                i = crate::scan::string_end(text, i + 1).ok()? + 1;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The bracket (`'{'` or `'['`) that opens level `limit + 1` of `value` as its JSON text is
/// written (members in key order), if it nests deeper than `limit`. Walks without recursion, so
/// that a value of any depth can be measured.
pub fn too_deep_value(value: &serde_json::Value, limit: usize) -> Option<char> {
    use serde_json::Value;
    // Containers only, in document order; scalars are never pushed.
    let mut todo = vec![(value, 1usize)];
    while let Some((v, level)) = todo.pop() {
        let bracket = match v {
            Value::Object(_) => '{',
            Value::Array(_) => '[',
            _ => continue,
        };
        if level > limit {
            return Some(bracket);
        }
        let containers = |c: &&Value| matches!(c, Value::Object(_) | Value::Array(_));
        match v {
            Value::Object(m) => {
                todo.extend(m.values().rev().filter(containers).map(|c| (c, level + 1)))
            }
            Value::Array(a) => {
                todo.extend(a.iter().rev().filter(containers).map(|c| (c, level + 1)))
            }
            _ => {}
        }
    }
    None
}

/// The JSON values one after another in `text` (a file of concatenated documents), each nested
/// up to [`MAX_DEPTH`] levels; after an error there are no more.
pub fn values(text: &[u8]) -> impl Iterator<Item = serde_json::Result<serde_json::Value>> + '_ {
    let deep = too_deep(text, MAX_DEPTH);
    // The values before the one too deep are read as usual; that one ends in its error.
    let mut de = serde_json::Deserializer::from_slice(&text[..deep.unwrap_or(text.len())]);
    de.disable_recursion_limit();
    let mut values = de.into_iter::<serde_json::Value>();
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let next = match values.next() {
            Some(Ok(v)) => return Some(Ok(v)),
            Some(Err(e)) => Some(Err(e)),
            None => None,
        };
        done = true;
        match deep {
            Some(_) => Some(check_depth(text, MAX_DEPTH).map(|()| serde_json::Value::Null)),
            None => next,
        }
    })
}

/// Runs `f` on a stack of [`STACK_BYTES`] on the calling thread (for callers on threads of
/// their own, e.g. a test harness or a fuzzer, that feed inputs as deep as kube-apiserver reads).
pub fn with_stack<T>(f: impl FnOnce() -> T) -> T {
    stacker::grow(STACK_BYTES, f)
}

/// Spawns `f` on a thread of [`STACK_BYTES`] named `name`.
pub fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .stack_size(STACK_BYTES)
        .spawn(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn the_apiservers_limit_and_its_message() {
        spawn("deep-test", || {
            let ok: Value = from_str(&nested(MAX_DEPTH)).unwrap();
            drop(ok);
            let e = from_str::<Value>(&nested(MAX_DEPTH + 1)).unwrap_err();
            assert_eq!(
                e.to_string(),
                "invalid character '[' exceeded max depth at line 1 column 10001"
            );
            // A body two levels inside a review may have the whole limit.
            let review = format!(r#"{{"request":{{"object":{}}}}}"#, nested(MAX_DEPTH));
            assert!(from_slice::<Value>(review.as_bytes()).is_err());
            assert!(from_slice_within::<Value>(review.as_bytes(), 2).is_ok());
            // Brackets inside strings are not nesting; lines and columns as serde_json's.
            let text = format!("{{\"a\": \"[[[{{\",\n  \"b\": {}}}", nested(MAX_DEPTH));
            let e = from_str::<Value>(&text).unwrap_err();
            assert_eq!(
                e.to_string(),
                "invalid character '[' exceeded max depth at line 2 column 10007"
            );
        })
        .unwrap()
        .join()
        .unwrap();
    }

    #[test]
    fn values_too_deep_name_the_bracket_go_stops_at() {
        spawn("deep-value-test", || {
            let v: Value = from_str(&format!(r#"{{"a":[1,{{"b":{}}}]}}"#, nested(4))).unwrap();
            // `{`, `[`, `{`, then four `[`: seven levels, level 3 opened by `{`.
            assert_eq!(too_deep_value(&v, 7), None);
            assert_eq!(too_deep_value(&v, 6), Some('['));
            assert_eq!(too_deep_value(&v, 2), Some('{'));
            let deep: Value = from_str(&nested(MAX_DEPTH)).unwrap();
            assert_eq!(too_deep_value(&deep, MAX_DEPTH), None);
            assert_eq!(too_deep_value(&deep, MAX_DEPTH - 1), Some('['));
        })
        .unwrap()
        .join()
        .unwrap();
    }

    #[test]
    fn shallow_errors_are_serde_jsons() {
        let e = from_str::<Value>("{\"a\": 01}").unwrap_err();
        assert_eq!(e.to_string(), "invalid number at line 1 column 8");
        let e = from_str::<Value>(&format!("{} x", nested(200))).unwrap_err();
        assert_eq!(e.to_string(), "trailing characters at line 1 column 403");
    }
}

#[cfg(test)]
mod every_parse {
    /// Every parse of JSON text in the crate goes through this module, so that none stops at
    /// serde_json's 128 levels.
    #[test]
    fn goes_through_this_module() {
        let mut offenders = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src"
        ))];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && !path.ends_with("src/json.rs")
                {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for (n, line) in text.lines().enumerate() {
                        let called = ["from_slice", "from_str", "from_reader"]
                            .iter()
                            .any(|f| line.contains(&format!("serde_json::{f}")));
                        if called {
                            offenders.push(format!("{}:{}", path.display(), n + 1));
                        }
                    }
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "use crate::json instead: {offenders:?}"
        );
    }
}
