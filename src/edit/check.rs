//! Checking an edited configuration text: parsed, defaulted and validated as everywhere else in
//! hookscope (and as kube-apiserver does on create or update), with every problem placed at its
//! line and column in the text. A text may hold webhook configurations, admission policies and
//! their bindings (Validating- and MutatingAdmissionPolicy), alone or mixed, as release manifests
//! do.

use std::collections::HashMap;
use std::fmt;

use super::locate::{Locator, TextPosition};
use crate::KubeVersion;
use crate::api::{WebhookConfiguration, WebhookKind};
use crate::config::policy::{self as policy_config, LoadedPolicy, PolicyObject, PolicySet};
use crate::config::{self, LoadError, LoadedConfiguration, Source};
use crate::engine::{Engine, EngineOptions};

/// How serious a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// The edit cannot become active.
    Error,
    /// Reported, but the edit may become active.
    Warning,
}

/// Where a problem comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// The text is not valid YAML/JSON.
    Syntax,
    /// A document is not a webhook configuration or admission policy, or a field has the wrong
    /// type.
    Load,
    /// kube-apiserver's validation refuses the configuration (for a policy, its CEL compile and
    /// type errors included).
    Invalid,
    /// The modelled release does not serve the object's apiVersion (kubectl apply fails).
    Unserved,
    /// Two configurations of one kind share a name (the apiserver keeps one object per name).
    DuplicateName,
    /// A field the API does not know (the apiserver ignores it, which usually hides a typo).
    UnknownField,
    /// A best-practice warning ([`crate::config::lint`]).
    Lint,
    /// The text holds no webhook configuration and no admission policy or binding at all.
    Empty,
    /// The modelled release runs the object's kind only with a feature gate switched on.
    FeatureGate,
}

/// One problem of an edit, placed in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Error or warning.
    pub severity: Severity,
    /// Where it comes from.
    pub kind: ProblemKind,
    /// Where in the edited text.
    pub position: TextPosition,
    /// The 1-based object number (each YAML document and each `*List` item counts), when the
    /// problem concerns one.
    pub document: Option<usize>,
    /// `Kind/name` of the configuration concerned, when it could be read.
    pub configuration: Option<String>,
    /// Upstream field path, e.g. `webhooks[0].rules[0].operations[0]` (empty: the document).
    pub field: String,
    /// What is wrong, as upstream words it.
    pub message: String,
}

impl Problem {
    /// A problem of the text as a whole, placed at its first line.
    fn whole_text(severity: Severity, kind: ProblemKind, message: String) -> Problem {
        Problem {
            severity,
            kind,
            position: TextPosition {
                line: 1,
                column: None,
            },
            document: None,
            configuration: None,
            field: String::new(),
            message,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}", self.position.line)?;
        if let Some(c) = self.position.column {
            write!(f, ", column {c}")?;
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// The result of checking an edit.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The file name given (used in nothing but messages).
    pub file: String,
    /// Every configuration that could be read, defaulted (`defaulted` says which fields), in
    /// text order; present even when there are errors, for display.
    pub configurations: Vec<LoadedConfiguration>,
    /// Every admission policy and binding that could be read, defaulted, in text order.
    pub policies: Vec<LoadedPolicy>,
    /// Errors, then warnings, each group in text order.
    pub problems: Vec<Problem>,
}

impl Checked {
    /// Whether the edit may replace the active configuration: no errors.
    pub fn may_activate(&self) -> bool {
        self.errors().next().is_none()
    }

    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Warning)
    }

    /// The defaulted configurations.
    pub fn webhook_configurations(&self) -> Vec<WebhookConfiguration> {
        self.configurations
            .iter()
            .map(|l| l.configuration.clone())
            .collect()
    }

    /// The defaulted policies and bindings, a later one of a kind and name replacing an
    /// earlier one (there is none without errors).
    pub fn policy_set(&self) -> PolicySet {
        let mut set = PolicySet::default();
        for p in &self.policies {
            set.insert(p.object.clone());
        }
        set
    }

    /// The engine for this edit, when it may become active: its webhook configurations and its
    /// policies with their bindings.
    pub fn engine(&self, options: EngineOptions) -> Option<Engine> {
        self.may_activate().then(|| {
            let set = self.policy_set();
            Engine::new(&self.webhook_configurations(), options)
                .with_policies(&set.validating, &set.validating_bindings)
                .with_mutating_policies(&set.mutating, &set.mutating_bindings)
        })
    }
}

/// The first Go-quoted value of a validation message (`Invalid value: "x": …`), to point at the
/// entry that holds it.
fn quoted_value(message: &str) -> Option<String> {
    let start = message.find(": \"")? + 3;
    let mut out = String::new();
    let mut chars = message[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => out.push(chars.next()?),
            c => out.push(c),
        }
    }
    None
}

/// Where each object sits: its document's first line and its index in a `*List`.
struct Places {
    first_object_at_line: HashMap<usize, usize>,
}

impl Places {
    fn new(results: &[Result<LoadedConfiguration, LoadError>]) -> Self {
        let mut first_object_at_line: HashMap<usize, usize> = HashMap::new();
        for r in results {
            let at = match r {
                Ok(l) => &l.source,
                Err(e) => match source_of(e) {
                    Some(at) => at,
                    None => continue,
                },
            };
            let line = at.line.unwrap_or(1);
            let first = first_object_at_line.entry(line).or_insert(at.document);
            *first = (*first).min(at.document);
        }
        Self {
            first_object_at_line,
        }
    }

    fn item(&self, at: &Source) -> usize {
        let line = at.line.unwrap_or(1);
        at.document
            - self
                .first_object_at_line
                .get(&line)
                .copied()
                .unwrap_or(at.document)
    }
}

fn source_of(e: &LoadError) -> Option<&Source> {
    match e {
        LoadError::Io { .. } => None,
        LoadError::Syntax { at, .. }
        | LoadError::NotAnObject { at, .. }
        | LoadError::Removed { at, .. }
        | LoadError::UnknownKind { at, .. }
        | LoadError::OtherKind { at, .. }
        | LoadError::UnsupportedVersion { at, .. }
        | LoadError::FieldType { at, .. } => Some(at),
    }
}

/// The message of a load error without the file/document prefix its `Display` starts with.
fn load_message(e: &LoadError, at: &Source, item: Option<usize>) -> String {
    let full = e.to_string();
    let mut prefix = at.to_string();
    if let Some(i) = item {
        prefix.push_str(&format!(", List item {}", i + 1));
    }
    full.strip_prefix(&prefix)
        .and_then(|m| m.strip_prefix(": "))
        .map(str::to_string)
        .unwrap_or(full)
}

/// Checks an edited text (`file` names it in messages) for the newest release modelled; see
/// [`check_for`].
pub fn check(text: &str, file: &str, previous: &[WebhookConfiguration]) -> Checked {
    check_for(text, file, (previous, &[]), KubeVersion::default())
}

/// Checks an edited text (`file` names it in messages) as a cluster of `version` would take it.
/// `previous` holds the configurations and the admission policies and bindings active before
/// the edit (defaulted): an object that existed before (same kind and name) is validated as an
/// update against it, with upstream's ratcheting; any other as a create, as `check` and
/// `replay` load them. A policy or binding is also refused when `version` does not serve its
/// apiVersion.
pub fn check_for(
    text: &str,
    file: &str,
    (previous, previous_policies): (&[WebhookConfiguration], &[PolicyObject]),
    version: KubeVersion,
) -> Checked {
    let text = text.trim_start_matches('\u{feff}');
    let results = config::parse_documents(text, file);
    let places = Places::new(&results);
    let mut locator = Locator::new(text);
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut configurations = Vec::new();
    let mut names: HashMap<(WebhookKind, String), usize> = HashMap::new();
    for r in results {
        let mut loaded = match r {
            Ok(l) => l,
            // A manifest's other objects are kept as they are, unchecked.
            Err(e) if e.is_other_kind() => continue,
            Err(e) => {
                errors.push(load_problem(&e, &places, &mut locator));
                continue;
            }
        };
        loaded.apply_defaults();
        let at = loaded.source.clone();
        let line = at.line.unwrap_or(1);
        let item = Some(places.item(&at));
        let cfg = &loaded.configuration;
        let who = format!("{}/{}", cfg.kind.configuration_kind(), cfg.name);
        let mut problem =
            |severity, kind, field: &str, message: String, value: Option<&str>| Problem {
                severity,
                kind,
                position: locator.locate(line, item, field, value),
                document: Some(at.document + 1),
                configuration: Some(who.clone()),
                field: field.to_string(),
                message,
            };
        let old = previous
            .iter()
            .find(|p| p.kind == cfg.kind && p.name == cfg.name && !cfg.name.is_empty());
        for e in config::validate_in(cfg, old, version) {
            let value = quoted_value(&e.message);
            errors.push(problem(
                Severity::Error,
                ProblemKind::Invalid,
                &e.field,
                e.message,
                value.as_deref(),
            ));
        }
        let seen = names.entry((cfg.kind, cfg.name.clone())).or_insert(0);
        *seen += 1;
        shared_problems(
            &mut problem,
            (cfg.kind.resource(), &cfg.name, *seen),
            &loaded.unknown_fields,
            (&mut errors, &mut warnings),
        );
        for l in config::lint(cfg) {
            warnings.push(problem(
                Severity::Warning,
                ProblemKind::Lint,
                &l.field,
                l.message,
                None,
            ));
        }
        configurations.push(loaded);
    }
    let policies = check_policies(
        (text, file),
        previous_policies,
        version,
        &places,
        &mut locator,
        (&mut errors, &mut warnings),
    );
    if configurations.is_empty() && policies.is_empty() && errors.is_empty() {
        warnings.push(Problem::whole_text(
            Severity::Warning,
            ProblemKind::Empty,
            "no webhook configuration or admission policy: no webhook will be called, no policy evaluated".into(),
        ));
    }
    errors.sort_by_key(|p| p.position);
    warnings.sort_by_key(|p| p.position);
    errors.extend(warnings);
    Checked {
        file: file.to_string(),
        configurations,
        policies,
        problems: errors,
    }
}

/// The admission policies and bindings of `text`, defaulted; their problems added to `errors`
/// and `warnings` (syntax errors were reported with the configurations).
fn check_policies(
    (text, file): (&str, &str),
    previous: &[PolicyObject],
    version: KubeVersion,
    places: &Places,
    locator: &mut Locator<'_>,
    (errors, warnings): (&mut Vec<Problem>, &mut Vec<Problem>),
) -> Vec<LoadedPolicy> {
    let mut policies = Vec::new();
    let mut names: HashMap<(&'static str, String), usize> = HashMap::new();
    for r in config::parse_policy_documents(text, file) {
        let mut loaded = match r {
            Ok(l) => l,
            Err(e) => {
                errors.push(load_problem(&e, places, locator));
                continue;
            }
        };
        loaded.apply_defaults();
        let at = loaded.source.clone();
        let line = at.line.unwrap_or(1);
        let item = Some(places.item(&at));
        let object = &loaded.object;
        let who = format!("{}/{}", object.kind(), object.name());
        let unserved = policy_config::unserved(object, version);
        let old = previous.iter().find(|p| {
            p.kind() == object.kind() && p.name() == object.name() && !object.name().is_empty()
        });
        let invalid = match (&unserved, old) {
            (Some(_), _) => Vec::new(),
            (None, Some(old)) => {
                policy_config::validate_policy_object_update_in(object, old, version)
            }
            (None, None) => policy_config::validate_policy_object_in(object, version),
        };
        // A CEL error at the character it names.
        let cel_at: Vec<Option<TextPosition>> = invalid
            .iter()
            .map(|e| {
                let value = locator.locate_value(line, item, &e.field)?;
                cel_error_position(text, value, &e.message)
            })
            .collect();
        let mut problem =
            |severity, kind, field: &str, message: String, value: Option<&str>| Problem {
                severity,
                kind,
                position: locator.locate(line, item, field, value),
                document: Some(at.document + 1),
                configuration: Some(who.clone()),
                field: field.to_string(),
                message,
            };
        // Not served: kubectl apply fails before anything is validated.
        if let Some(why) = unserved {
            errors.push(problem(
                Severity::Error,
                ProblemKind::Unserved,
                "apiVersion",
                why,
                None,
            ));
        } else {
            for (e, cel_at) in invalid.iter().zip(cel_at) {
                let value = quoted_value(&e.message);
                let mut p = problem(
                    Severity::Error,
                    ProblemKind::Invalid,
                    &e.field,
                    e.message.clone(),
                    value.as_deref(),
                );
                if let Some(at) = cel_at {
                    p.position = at;
                }
                errors.push(p);
            }
            if invalid.is_empty()
                && let Some(note) = policy_config::needs_enabling(object, version)
            {
                warnings.push(problem(
                    Severity::Warning,
                    ProblemKind::FeatureGate,
                    "apiVersion",
                    note,
                    None,
                ));
            }
        }
        let seen = names
            .entry((object.kind(), object.name().to_string()))
            .or_insert(0);
        *seen += 1;
        shared_problems(
            &mut problem,
            (&policy_resource(object.kind()), object.name(), *seen),
            &loaded.unknown_fields,
            (errors, warnings),
        );
        policies.push(loaded);
    }
    policies
}

/// The problems of every kind of object: its name used again in the text (the object of
/// `resource` named `name`, seen `seen` times so far), and its unknown fields.
fn shared_problems(
    problem: &mut impl FnMut(Severity, ProblemKind, &str, String, Option<&str>) -> Problem,
    (resource, name, seen): (&str, &str, usize),
    unknown_fields: &[String],
    (errors, warnings): (&mut Vec<Problem>, &mut Vec<Problem>),
) {
    if seen > 1 && !name.is_empty() {
        errors.push(problem(
            Severity::Error,
            ProblemKind::DuplicateName,
            "metadata.name",
            format!(
                "{resource}.admissionregistration.k8s.io {name:?} already exists (another document of this text has the same kind and name)"
            ),
            None,
        ));
    }
    for field in unknown_fields {
        warnings.push(problem(
            Severity::Warning,
            ProblemKind::UnknownField,
            field,
            "unknown field: the API ignores it (a typo?)".into(),
            None,
        ));
    }
}

/// The 1-based line of the `metadata.name` of the admission policy or binding of `kind` and
/// `name` in `text`, when the text holds it.
pub fn object_line(text: &str, kind: &str, name: &str) -> Option<usize> {
    let text = text.trim_start_matches('\u{feff}');
    let found = config::parse_policy_documents(text, "")
        .into_iter()
        .flatten()
        .find(|l| l.object.kind() == kind && l.object.name() == name)?;
    let places = Places::new(&config::parse_documents(text, ""));
    let line = found.source.line.unwrap_or(1);
    let item = Some(places.item(&found.source));
    Some(
        Locator::new(text)
            .locate(line, item, "metadata.name", None)
            .line,
    )
}

/// The resource of a policy kind (`validatingadmissionpolicies`), as the apiserver's
/// AlreadyExists message names it.
fn policy_resource(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    match lower.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{lower}s"),
    }
}

/// Where a CEL compile error points in the text: cel-go reports `ERROR: <input>:LINE:COLUMN: …`
/// within the expression (its caret under the character at COLUMN - 1, counted from 0). The
/// expression's value starts at `value`: written plain or quoted on one line (escapes counted as
/// the one character they stand for), or as a literal (`|`) or folded (`>`) block. None for any
/// other message or layout.
fn cel_error_position(text: &str, value: TextPosition, message: &str) -> Option<TextPosition> {
    let start = value.column?;
    let rest = message.split("<input>:").nth(1)?;
    let mut numbers = rest.splitn(3, ':');
    let line: usize = numbers.next()?.parse().ok()?;
    let column: usize = numbers.next()?.parse().ok()?;
    let target = column.checked_sub(1)?;
    let lines: Vec<&str> = text.lines().collect();
    let first = value.line.checked_sub(1)?;
    let chars: Vec<char> = lines.get(first)?.chars().skip(start - 1).collect();
    let at = |line: usize, column: usize| {
        Some(TextPosition {
            line: line + 1,
            column: Some(column + 1),
        })
    };
    match chars.first()? {
        '|' | '>' => {
            let folded = chars[0] == '>';
            // The block's lines, at the indentation of its first one.
            let body: Vec<(usize, &str)> = (first + 1..lines.len())
                .map(|n| (n, lines[n]))
                .take_while(|(_, l)| l.trim().is_empty() || l.starts_with(' '))
                .collect();
            let indent = body
                .iter()
                .find(|(_, l)| !l.trim().is_empty())
                .map(|(_, l)| l.len() - l.trim_start().len())?;
            let in_block = |l: &str| l.chars().count() > indent;
            if !folded {
                let (n, l) = *body.get(line.checked_sub(1)?)?;
                return (in_block(l) && indent + target < l.chars().count())
                    .then(|| at(n, indent + target))
                    .flatten();
            }
            // Folded: the block's lines joined by one space each (a blank line would start a
            // new expression line; not followed here).
            if line != 1 {
                return None;
            }
            let mut left = target;
            for (n, l) in body {
                let width = l.chars().count().checked_sub(indent)?;
                if left < width {
                    return at(n, indent + left);
                }
                left = left.checked_sub(width + 1)?;
            }
            None
        }
        &quote @ ('"' | '\'') => {
            if line != 1 {
                return None;
            }
            let mut read = 0;
            let mut i = 1;
            while i < chars.len() {
                if read == target {
                    return at(first, start - 1 + i);
                }
                match (chars[i], quote) {
                    ('\\', '"') => {
                        i += match chars.get(i + 1) {
                            Some('x') => 4,
                            Some('u') => 6,
                            Some('U') => 10,
                            _ => 2,
                        };
                    }
                    ('\'', '\'') if chars.get(i + 1) == Some(&'\'') => i += 2,
                    (c, q) if c == q => return None,
                    _ => i += 1,
                }
                read += 1;
            }
            None
        }
        _ => (line == 1 && target < chars.len()).then(|| at(first, start - 1 + target))?,
    }
}

fn load_problem(e: &LoadError, places: &Places, locator: &mut Locator<'_>) -> Problem {
    let Some(at) = source_of(e) else {
        return Problem::whole_text(Severity::Error, ProblemKind::Load, e.to_string());
    };
    let list_item = match e {
        LoadError::Removed { item, .. }
        | LoadError::UnknownKind { item, .. }
        | LoadError::OtherKind { item, .. }
        | LoadError::UnsupportedVersion { item, .. }
        | LoadError::FieldType { item, .. } => *item,
        _ => None,
    };
    let line = at.line.unwrap_or(1);
    let item = list_item.or_else(|| Some(places.item(at)));
    let (kind, field, position) = match e {
        LoadError::Syntax {
            line,
            column,
            message,
            ..
        } => {
            return Problem {
                severity: Severity::Error,
                kind: ProblemKind::Syntax,
                position: TextPosition {
                    line: *line,
                    column: Some(*column),
                },
                document: Some(at.document + 1),
                configuration: None,
                field: String::new(),
                message: format!("YAML syntax error: {message}"),
            };
        }
        LoadError::FieldType { field, .. } => (
            ProblemKind::Load,
            field.clone(),
            locator.locate(line, item, field, None),
        ),
        LoadError::UnsupportedVersion { .. } => (
            ProblemKind::Load,
            "apiVersion".to_string(),
            locator.locate(line, item, "apiVersion", None),
        ),
        LoadError::Removed { .. } | LoadError::UnknownKind { .. } | LoadError::OtherKind { .. } => {
            (
                ProblemKind::Load,
                "kind".to_string(),
                locator.locate(line, item, "kind", None),
            )
        }
        _ => (
            ProblemKind::Load,
            String::new(),
            locator.locate(line, item, "", None),
        ),
    };
    let message = match e {
        LoadError::FieldType { message, .. } => message.clone(),
        _ => load_message(e, at, list_item),
    };
    Problem {
        severity: Severity::Error,
        kind,
        position,
        document: Some(at.document + 1),
        configuration: None,
        field,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The character under cel-go's caret, in each way YAML writes a scalar.
    #[test]
    fn cel_errors_point_at_the_caret_in_every_scalar_style() {
        let caret = |text: &str, value: (usize, usize), line: usize, column: usize| {
            let message = format!(
                "Invalid value: \"…\": compilation failed: ERROR: <input>:{line}:{column}: x"
            );
            let at = TextPosition {
                line: value.0,
                column: Some(value.1),
            };
            cel_error_position(text, at, &message).map(|p| {
                let l = text.lines().nth(p.line - 1).unwrap();
                l.chars().nth(p.column.unwrap() - 1).unwrap()
            })
        };
        // Plain, and quoted with an escape and a doubled quote before the error.
        assert_eq!(caret("e: a < = b\n", (1, 4), 1, 4), Some(' '));
        assert_eq!(caret("e: a < = b\n", (1, 4), 1, 5), Some('='));
        assert_eq!(caret("e: \"'\\\"' + x\"\n", (1, 4), 1, 5), Some('+'));
        assert_eq!(caret("e: ''''' + x'\n", (1, 4), 1, 4), Some('+'));
        // A literal block: the expression's second line.
        let literal = "e: |\n  a &&\n    b ++ c\nf: 1\n";
        assert_eq!(caret(literal, (1, 4), 2, 5), Some('+'));
        // A folded block: its lines joined by a space.
        let folded = "e: >\n  a &&\n  b ++ c\nf: 1\n";
        assert_eq!(caret(folded, (1, 4), 1, 8), Some('+'));
        // Past the end, or another message: no place.
        assert_eq!(caret("e: ab\n", (1, 4), 1, 9), None);
        let at = TextPosition {
            line: 1,
            column: Some(4),
        };
        assert_eq!(cel_error_position("e: ab\n", at, "Required value"), None);
    }

    #[test]
    fn quoted_values() {
        assert_eq!(
            quoted_value(r#"Invalid value: "a\"b": must be"#).as_deref(),
            Some("a\"b")
        );
        assert_eq!(quoted_value("Required value"), None);
    }
}
