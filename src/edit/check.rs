//! Checking an edited configuration text: parsed, defaulted and validated as everywhere else in
//! hookscope (and as kube-apiserver does on create or update), with every problem placed at its
//! line and column in the text.

use std::collections::HashMap;
use std::fmt;

use super::locate::{Locator, TextPosition};
use crate::api::{WebhookConfiguration, WebhookKind};
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
    /// A document is not a webhook configuration, or a field has the wrong type.
    Load,
    /// kube-apiserver's validation refuses the configuration.
    Invalid,
    /// Two configurations of one kind share a name (the apiserver keeps one object per name).
    DuplicateName,
    /// A field the API does not know (the apiserver ignores it, which usually hides a typo).
    UnknownField,
    /// A best-practice warning ([`crate::config::lint`]).
    Lint,
    /// The text holds no webhook configuration at all.
    Empty,
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

    /// The engine for this edit, when it may become active.
    pub fn engine(&self, options: EngineOptions) -> Option<Engine> {
        self.may_activate()
            .then(|| Engine::new(&self.webhook_configurations(), options))
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

/// Checks an edited text (`file` names it in messages). `previous` holds the configurations
/// active before the edit (defaulted): a configuration that existed before (same kind and name)
/// is validated as an update against it, with upstream's ratcheting; any other as a create.
pub fn check(text: &str, file: &str, previous: &[WebhookConfiguration]) -> Checked {
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
        for e in config::validate(cfg, old) {
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
        if *seen > 1 && !cfg.name.is_empty() {
            errors.push(problem(
                Severity::Error,
                ProblemKind::DuplicateName,
                "metadata.name",
                format!(
                    "{}.admissionregistration.k8s.io {:?} already exists (another document of this text has the same kind and name)",
                    cfg.kind.resource(),
                    cfg.name
                ),
                None,
            ));
        }
        for field in &loaded.unknown_fields {
            warnings.push(problem(
                Severity::Warning,
                ProblemKind::UnknownField,
                field,
                "unknown field: the API ignores it (a typo?)".into(),
                None,
            ));
        }
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
    if configurations.is_empty() && errors.is_empty() {
        warnings.push(Problem::whole_text(
            Severity::Warning,
            ProblemKind::Empty,
            "no webhook configuration: no webhook will be called".into(),
        ));
    }
    errors.sort_by_key(|p| p.position);
    warnings.sort_by_key(|p| p.position);
    errors.extend(warnings);
    Checked {
        file: file.to_string(),
        configurations,
        problems: errors,
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

    #[test]
    fn quoted_values() {
        assert_eq!(
            quoted_value(r#"Invalid value: "a\"b": must be"#).as_deref(),
            Some("a\"b")
        );
        assert_eq!(quoted_value("Required value"), None);
    }
}
