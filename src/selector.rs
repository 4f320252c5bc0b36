//! Label selectors: `metav1.LabelSelectorAsSelector` and the matching of `pkg/labels/selector.go`
//! (kubernetes/apimachinery).
//!
//! A parsed [`Selector`] holds its requirements sorted by key, as upstream does, and stops at the
//! first requirement that fails. Matching does not allocate.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::api::LabelSelector;
use crate::config::validation::{
    go_json_string, go_json_strings, go_quote, is_qualified_name, is_valid_label_value,
};

/// Why a label selector could not be parsed; the text is apimachinery's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: Box<str>,
    op: Op,
    values: Box<[Box<str>]>,
}

impl Requirement {
    /// Whether the requirement can only hold when its key is present.
    fn requires_key(&self) -> bool {
        matches!(self.op, Op::Equals | Op::In | Op::Exists)
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.iter().any(|x| &**x == v)
    }

    /// `Requirement.Matches` given the label's value (`None` when the key is absent).
    fn matches_value(&self, value: Option<&str>) -> bool {
        match (self.op, value) {
            (Op::Equals | Op::In, Some(v)) => self.has_value(v),
            (Op::Equals | Op::In, None) => false,
            (Op::NotIn, Some(v)) => !self.has_value(v),
            (Op::NotIn, None) => true,
            (Op::Exists, v) => v.is_some(),
            (Op::DoesNotExist, v) => v.is_none(),
        }
    }
}

impl fmt::Display for Requirement {
    /// `Requirement.String()`: `!k`, `k`, `k=v`, `k in (a,b)`, `k notin (a,b)`; values sorted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.op == Op::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let (open, close) = match self.op {
            Op::Exists | Op::DoesNotExist => return Ok(()),
            Op::Equals => ("=", ""),
            Op::In => (" in (", ")"),
            Op::NotIn => (" notin (", ")"),
        };
        f.write_str(open)?;
        let mut values: Vec<&str> = self.values.iter().map(|v| &**v).collect();
        values.sort_unstable();
        f.write_str(&values.join(","))?;
        f.write_str(close)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Inner {
    /// `labels.Nothing()`: the selector of a nil `*LabelSelector`.
    Nothing,
    /// Requirements sorted by key; empty is `labels.Everything()`.
    Requirements {
        reqs: Arc<[Requirement]>,
        /// How many distinct keys must be present for a match (the keys of `=`, `in` and exists
        /// requirements): label sets with fewer labels cannot match.
        present: usize,
    },
}

impl Inner {
    fn requirements(reqs: Vec<Requirement>) -> Inner {
        let mut present = 0;
        let mut last: Option<&str> = None;
        for r in reqs.iter().filter(|r| r.requires_key()) {
            if last != Some(&*r.key) {
                present += 1;
                last = Some(&*r.key);
            }
        }
        Inner::Requirements {
            reqs: reqs.into(),
            present,
        }
    }
}

/// A parsed label selector. Cheap to clone (the requirements are shared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    inner: Inner,
}

impl Selector {
    /// `metav1.LabelSelectorAsSelector` for a present selector: `{}` selects everything; the first
    /// invalid requirement (matchLabels in key order, then matchExpressions in order) is reported
    /// with apimachinery's text, e.g. `"Foo" is not a valid label selector operator` or
    /// `values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty`.
    pub fn parse(sel: &LabelSelector) -> Result<Selector, SelectorError> {
        let match_labels = sel.match_labels.as_ref();
        let match_expressions = sel.match_expressions.as_deref().unwrap_or_default();
        let mut reqs =
            Vec::with_capacity(match_labels.map_or(0, BTreeMap::len) + match_expressions.len());
        if let Some(labels) = match_labels {
            for (k, v) in labels {
                reqs.push(new_requirement(
                    k,
                    Op::Equals,
                    Some(std::slice::from_ref(v)),
                )?);
            }
        }
        for expr in match_expressions {
            let op = match expr.operator.as_str() {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => {
                    return Err(SelectorError(format!(
                        "{} is not a valid label selector operator",
                        go_quote(other)
                    )));
                }
            };
            let values = expr.values.as_deref().filter(|v| !v.is_empty());
            reqs.push(new_requirement(&expr.key, op, values)?);
        }
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selector {
            inner: Inner::requirements(reqs),
        })
    }

    /// Parses an optional selector as upstream does for a `*LabelSelector`: `None` selects nothing.
    pub fn parse_optional(sel: Option<&LabelSelector>) -> Result<Selector, SelectorError> {
        sel.map_or_else(|| Ok(Selector::nothing()), Selector::parse)
    }

    /// `labels.Everything()`.
    pub fn everything() -> Selector {
        Selector {
            inner: Inner::requirements(Vec::new()),
        }
    }

    /// `labels.Nothing()`.
    pub fn nothing() -> Selector {
        Selector {
            inner: Inner::Nothing,
        }
    }

    /// `Selector.Empty()`: true when the selector selects everything without looking at labels.
    pub fn is_empty(&self) -> bool {
        matches!(&self.inner, Inner::Requirements { reqs, .. } if reqs.is_empty())
    }

    /// True for `labels.Nothing()`.
    pub fn is_nothing(&self) -> bool {
        self.inner == Inner::Nothing
    }

    /// `Selector.Matches`: every requirement holds for these labels. Label sets too small to hold
    /// every key the selector requires are refused without looking them up.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match &self.inner {
            Inner::Nothing => false,
            Inner::Requirements { reqs, present } => {
                labels.len() >= *present
                    && reqs.iter().all(|r| r.matches_value(label(labels, &r.key)))
            }
        }
    }

    /// [`Selector::matches`] on labels taken straight from an object's `metadata.labels`; a
    /// non-string value counts as absent, and `None` is the empty label set.
    pub fn matches_json(
        &self,
        labels: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> bool {
        match &self.inner {
            Inner::Nothing => false,
            Inner::Requirements { reqs, present } => {
                labels.map_or(0, serde_json::Map::len) >= *present
                    && reqs.iter().all(|r| {
                        r.matches_value(
                            labels.and_then(|m| m.get(&*r.key)).and_then(|v| v.as_str()),
                        )
                    })
            }
        }
    }

    /// The first requirement (in evaluation order) that these labels fail, rendered for humans,
    /// e.g. `env in (prod,staging): label "env" is "dev"`; `None` when the selector matches.
    pub fn explain_mismatch(&self, labels: &BTreeMap<String, String>) -> Option<String> {
        match &self.inner {
            Inner::Nothing => Some("the selector is unset and selects nothing".to_string()),
            Inner::Requirements { reqs, .. } => reqs.iter().find_map(|r| {
                let value = labels.get(&*r.key).map(String::as_str);
                if r.matches_value(value) {
                    return None;
                }
                let key = go_json_string(&r.key);
                Some(match value {
                    Some(v) => format!("{r}: label {key} is {}", go_json_string(v)),
                    None => format!("{r}: label {key} is absent"),
                })
            }),
        }
    }
}

/// The value of label `key`. Small label sets are searched by equality, which compares lengths
/// before bytes, rather than by the map's ordering, which compares bytes first.
fn label<'l>(labels: &'l BTreeMap<String, String>, key: &str) -> Option<&'l str> {
    if labels.len() <= 4 {
        labels
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v.as_str())
    } else {
        labels.get(key).map(String::as_str)
    }
}

impl fmt::Display for Selector {
    /// apimachinery's `String()`: requirements joined by `,`; empty for everything and nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Inner::Requirements { reqs, .. } = &self.inner {
            for (i, r) in reqs.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{r}")?;
            }
        }
        Ok(())
    }
}

/// `labels.NewRequirement` with no field path; `values` is `None` for a nil slice. Every problem of
/// the requirement is reported, aggregated as upstream's `ErrorList.ToAggregate()`.
fn new_requirement(
    key: &str,
    op: Op,
    values: Option<&[String]>,
) -> Result<Requirement, SelectorError> {
    let mut errs: Vec<String> = Vec::new();
    let key_errs = is_qualified_name(key);
    if !key_errs.is_empty() {
        errs.push(format!(
            "key: Invalid value: {}: {}",
            go_quote(key),
            key_errs.join("; ")
        ));
    }
    let vals = values.unwrap_or_default();
    match op {
        Op::In | Op::NotIn if vals.is_empty() => errs.push(format!(
            "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
            go_json_strings(values)
        )),
        Op::Equals if vals.len() != 1 => errs.push(format!(
            "values: Invalid value: {}: exact-match compatibility requires one single value",
            go_json_strings(values)
        )),
        Op::Exists | Op::DoesNotExist if !vals.is_empty() => errs.push(format!(
            "values: Invalid value: {}: values set must be empty for exists and does not exist",
            go_json_strings(values)
        )),
        _ => {}
    }
    for (i, v) in vals.iter().enumerate() {
        let value_errs = is_valid_label_value(v);
        if !value_errs.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                go_quote(v),
                value_errs.join("; ")
            ));
        }
    }
    if !errs.is_empty() {
        return Err(SelectorError(aggregate(errs)));
    }
    Ok(Requirement {
        key: key.into(),
        op,
        values: vals.iter().map(|v| v.as_str().into()).collect(),
    })
}

/// `utilerrors.NewAggregate(errs).Error()`: one message as is, several de-duplicated in `[a, b]`.
fn aggregate(mut errs: Vec<String>) -> String {
    let mut seen = std::collections::HashSet::new();
    errs.retain(|e| seen.insert(e.clone()));
    if errs.len() == 1 {
        errs.pop().unwrap_or_default()
    } else {
        format!("[{}]", errs.join(", "))
    }
}

/// `LabelSelectorAsSelector(selector).String()` for a selector as JSON (`None` or `null`: a nil
/// selector); `None` when it is not a valid label selector.
pub fn label_selector_string(selector: Option<&serde_json::Value>) -> Option<String> {
    let parsed: Option<LabelSelector> = match selector {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(serde_json::from_value(v.clone()).ok()?),
    };
    Selector::parse_optional(parsed.as_ref())
        .ok()
        .map(|s| s.to_string())
}

/// `labels.SelectorFromSet(set).String()` for a map of labels as JSON (a ReplicationController's
/// selector): `k=v` sorted by key, joined by `,`; `None` when it is not a map of strings.
pub fn set_string(set: Option<&serde_json::Value>) -> Option<String> {
    let labels: BTreeMap<String, String> = match set {
        None | Some(serde_json::Value::Null) => BTreeMap::new(),
        Some(v) => serde_json::from_value(v.clone()).ok()?,
    };
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Some(pairs.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn json_map(text: &str) -> serde_json::Map<String, serde_json::Value> {
        crate::json::from_str(text).unwrap()
    }

    fn expr(key: &str, op: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.map(|v| v.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn sel(ml: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector {
            match_labels: (!ml.is_empty()).then(|| labels(ml)),
            match_expressions: (!exprs.is_empty()).then_some(exprs),
        }
    }

    #[test]
    fn empty_and_nothing() {
        let s = Selector::parse(&LabelSelector::default()).unwrap();
        assert!(s.is_empty());
        assert!(s.matches(&labels(&[])));
        assert_eq!(s.to_string(), "");
        let n = Selector::parse_optional(None).unwrap();
        assert!(!n.is_empty() && n.is_nothing());
        assert!(!n.matches(&labels(&[])));
        assert!(!n.matches_json(None));
        assert!(Selector::everything().is_empty());
    }

    #[test]
    fn operators() {
        let s = Selector::parse(&sel(
            &[("app", "web")],
            vec![
                expr("env", "In", Some(&["prod", "staging"])),
                expr("tier", "NotIn", Some(&["db"])),
                expr("team", "Exists", None),
                expr("legacy", "DoesNotExist", None),
            ],
        ))
        .unwrap();
        assert_eq!(
            s.to_string(),
            "app=web,env in (prod,staging),!legacy,team,tier notin (db)"
        );
        let ok = labels(&[("app", "web"), ("env", "prod"), ("team", "a")]);
        assert!(s.matches(&ok));
        assert_eq!(s.explain_mismatch(&ok), None);
        let mut bad = ok.clone();
        bad.insert("tier".into(), "db".into());
        assert!(!s.matches(&bad));
        assert_eq!(
            s.explain_mismatch(&bad).unwrap(),
            "tier notin (db): label \"tier\" is \"db\""
        );
        let mut bad = ok.clone();
        bad.insert("legacy".into(), "".into());
        assert!(!s.matches(&bad));
        bad.remove("legacy");
        bad.remove("team");
        assert_eq!(
            s.explain_mismatch(&bad).unwrap(),
            "team: label \"team\" is absent"
        );
        let mut bad = ok.clone();
        bad.insert("env".into(), "dev".into());
        assert_eq!(
            s.explain_mismatch(&bad).unwrap(),
            "env in (prod,staging): label \"env\" is \"dev\""
        );
    }

    #[test]
    fn too_few_labels_cannot_match() {
        // `a` is required twice but counts once; `b notin`, `!c` need no label.
        let s = Selector::parse(&sel(
            &[("a", "1")],
            vec![
                expr("a", "In", Some(&["1", "2"])),
                expr("b", "NotIn", Some(&["x"])),
                expr("c", "DoesNotExist", None),
            ],
        ))
        .unwrap();
        assert!(s.matches(&labels(&[("a", "1")])));
        // Larger label sets are looked up through the map.
        let many = [
            ("0", ""),
            ("a", "1"),
            ("d", ""),
            ("e", ""),
            ("f", ""),
            ("g", ""),
        ];
        assert!(s.matches(&labels(&many)));
        assert!(!s.matches(&labels(&[many.as_slice(), &[("c", "")]].concat())));
        assert!(!s.matches(&labels(&[])));
        assert!(!s.matches(&labels(&[("a", "1"), ("c", "")])));
        assert!(s.matches_json(Some(&json_map(r#"{"a": "1"}"#))));
        assert!(!s.matches_json(None));
        let s = Selector::parse(&sel(&[], vec![expr("x", "Exists", None)])).unwrap();
        assert!(!s.matches_json(Some(&json_map(r#"{"x": 1}"#))));
    }

    #[test]
    fn json_labels() {
        let s = Selector::parse(&sel(&[], vec![expr("a", "NotIn", Some(&["1"]))])).unwrap();
        assert!(s.matches_json(Some(&json_map(r#"{"a": 1}"#))));
        assert!(!s.matches_json(Some(&json_map(r#"{"a": "1"}"#))));
        assert!(s.matches_json(None));
    }

    #[test]
    fn errors() {
        let e = |s: LabelSelector| Selector::parse(&s).unwrap_err().0;
        assert_eq!(
            e(sel(&[], vec![expr("a", "Foo", None)])),
            "\"Foo\" is not a valid label selector operator"
        );
        assert_eq!(
            e(sel(&[], vec![expr("a", "In", Some(&[]))])),
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            e(sel(&[], vec![expr("a", "Exists", Some(&["x"]))])),
            "values: Invalid value: [\"x\"]: values set must be empty for exists and does not exist"
        );
        assert_eq!(
            e(sel(&[("a b", "c")], vec![])),
            "key: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        assert_eq!(
            e(sel(&[], vec![expr("-k", "In", Some(&["!"]))])),
            "[key: Invalid value: \"-k\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), values[0][-k]: Invalid value: \"!\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]"
        );
    }
}
