//! Reading the `--webhooks` paths of `replay` and `tui`: configurations defaulted and validated,
//! invalid ones left out and reported, and every path given checked for something usable.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use hookscope::KubeVersion;
use hookscope::api::{WebhookConfiguration, WebhookKind};
use hookscope::config::policy as policy_config;
use hookscope::config::typecheck;
use hookscope::config::{self, LoadError};
use hookscope::replay::report::{Problem, ProblemKind, Report};
use hookscope::replay::{IndexUnit, SourceRef};

/// The configurations accepted, by the file they were read from, in reading order; a file whose
/// documents were all left out is listed with none.
pub(crate) type ByFile = Vec<(String, Vec<WebhookConfiguration>)>;

/// What the `--webhooks` paths gave.
pub(crate) struct Configurations {
    /// The configurations accepted.
    pub by_file: ByFile,
    /// Per path holding objects of other kinds (a release manifest's Namespaces, Deployments,
    /// CustomResourceDefinitions…), which are skipped without a word: a line saying which.
    pub skipped: Vec<String>,
    /// The admission policies and bindings accepted.
    pub policies: PolicySet,
    /// The same, by the file they were read from, in reading order (one replaced by a later
    /// file's of the same kind and name is listed with the later file only).
    pub policies_by_file: Vec<(String, Vec<PolicyObject>)>,
}

pub(crate) use hookscope::config::policy::{PolicyObject, PolicySet};

impl Configurations {
    /// The configurations accepted, in reading order.
    pub fn all(&self) -> Vec<WebhookConfiguration> {
        (self.by_file.iter())
            .flat_map(|(_, c)| c.iter().cloned())
            .collect()
    }
}

/// Loads, defaults and validates the configurations of `paths`; invalid ones are left out and
/// reported, objects of other kinds skipped, those under an apiVersion `version` does not serve
/// kept with a warning. Each path given must yield at least one
/// configuration the apiserver would accept; one that does not (missing, unreadable, empty,
/// nothing but invalid documents or other kinds, captured requests) is reported as
/// [`ProblemKind::Unusable`].
pub(crate) fn load_configurations(
    paths: &[PathBuf],
    version: KubeVersion,
    report: &mut Report,
) -> Configurations {
    let mut by_file: ByFile = Vec::new();
    let mut skipped = Vec::new();
    let mut policies = PolicySet::default();
    let mut policies_by_file: Vec<(String, Vec<PolicyObject>)> = Vec::new();
    let mut names: HashMap<(WebhookKind, String), config::Source> = HashMap::new();
    for path in paths {
        let mut seen = Seen::default();
        for loaded in config::load_paths(std::slice::from_ref(path)) {
            seen.documents += 1;
            match loaded {
                Err(LoadError::OtherKind {
                    kind, api_version, ..
                }) if api_version.starts_with("admissionregistration.k8s.io/")
                    && (kind.starts_with("ValidatingAdmissionPolicy")
                        || kind.starts_with("MutatingAdmissionPolicy")) => {}
                Err(LoadError::OtherKind { kind, .. }) => seen.other_kinds.add(&kind),
                Err(e) => {
                    let (file, document) = e.location();
                    if let LoadError::Io { message, .. } = &e
                        && Path::new(file) == path
                    {
                        seen.unreadable = Some(message.clone());
                        continue;
                    }
                    if !matches!(e, LoadError::Io { .. }) {
                        file_entry(file, &mut by_file);
                    }
                    if let LoadError::UnknownKind { kind, .. } = &e {
                        seen.kinds.push(kind.clone());
                    }
                    seen.left_out(e.to_string());
                    report.push_problem(problem(
                        ProblemKind::Configuration,
                        file,
                        document.unwrap_or(0),
                        String::new(),
                        e.to_string(),
                    ));
                }
                Ok(mut l) => {
                    let at = file_entry(&l.source.file, &mut by_file);
                    l.apply_defaults();
                    let errors = config::validate_in(&l.configuration, None, version);
                    if errors.is_empty() {
                        seen.accepted += 1;
                        let cfg = &l.configuration;
                        if let Some(why) = config::unserved(cfg, version) {
                            report.push_problem(problem(
                                ProblemKind::Warning,
                                &l.source.file,
                                l.source.document + 1,
                                "apiVersion".into(),
                                why,
                            ));
                        }
                        if let Some(earlier) =
                            names.insert((cfg.kind, cfg.name.clone()), l.source.clone())
                        {
                            let earlier_file = by_file.iter_mut().find(|(f, _)| *f == earlier.file);
                            if let Some((_, configurations)) = earlier_file {
                                configurations.retain(|c| c.kind != cfg.kind || c.name != cfg.name);
                            }
                            report.push_problem(problem(
                                ProblemKind::Warning,
                                &l.source.file,
                                l.source.document + 1,
                                "metadata.name".into(),
                                replaces(cfg, &earlier),
                            ));
                        }
                        by_file[at].1.push(l.configuration);
                        continue;
                    }
                    if let Some(e) = errors.first() {
                        seen.left_out(format!("{}: {}: {}", l.source, e.field, e.message));
                    }
                    for e in errors {
                        report.push_problem(problem(
                            ProblemKind::Configuration,
                            &l.source.file,
                            l.source.document + 1,
                            e.field,
                            format!(
                                "{} {:?} left out (the apiserver would refuse it): {}",
                                l.configuration.kind.configuration_kind(),
                                l.configuration.name,
                                e.message
                            ),
                        ));
                    }
                }
            }
        }
        let mut gate_notes = std::collections::HashSet::new();
        for loaded in config::load_policy_paths(std::slice::from_ref(path)) {
            match loaded {
                // Unreadable files were reported with the configurations.
                Err(LoadError::Io { .. }) => {}
                Err(e) => {
                    let (file, document) = e.location();
                    // Listed, so that the console can open it to fix it.
                    policy_file_entry(file, &mut policies_by_file);
                    seen.left_out(e.to_string());
                    report.push_problem(problem(
                        ProblemKind::Configuration,
                        file,
                        document.unwrap_or(0),
                        String::new(),
                        e.to_string(),
                    ));
                }
                Ok(mut l) => {
                    l.apply_defaults();
                    policy_file_entry(&l.source.file, &mut policies_by_file);
                    let at = (&l.source.file, l.source.document + 1);
                    if let Some(why) = policy_config::unserved(&l.object, version) {
                        seen.left_out(format!("{}: {why}", l.source));
                        report.push_problem(problem(
                            ProblemKind::Configuration,
                            at.0,
                            at.1,
                            "apiVersion".into(),
                            format!("{} {:?} left out: {why}", l.object.kind(), l.object.name()),
                        ));
                        continue;
                    }
                    let errors = policy_config::validate_policy_object_in(&l.object, version);
                    if let Some(e) = errors.first() {
                        seen.left_out(format!("{}: {}: {}", l.source, e.field, e.message));
                    }
                    if !errors.is_empty() {
                        for e in errors {
                            report.push_problem(problem(
                                ProblemKind::Configuration,
                                at.0,
                                at.1,
                                e.field,
                                format!(
                                    "{} {:?} left out (the apiserver would refuse it): {}",
                                    l.object.kind(),
                                    l.object.name(),
                                    e.message
                                ),
                            ));
                        }
                        continue;
                    }
                    // Said once per file: every policy and binding of a release that needs
                    // the gate would repeat it.
                    if let Some(note) = policy_config::needs_enabling(&l.object, version)
                        && gate_notes.insert((l.source.file.clone(), note.clone()))
                    {
                        report.push_problem(problem(
                            ProblemKind::Warning,
                            at.0,
                            at.1,
                            "apiVersion".into(),
                            note,
                        ));
                    }
                    // What the status controller would write to the policy's
                    // status.typeChecking: the expressions that do not type-check against the
                    // schemas of the kinds the policy matches.
                    if let policy_config::PolicyObject::Policy(policy) = &l.object {
                        let warnings = typecheck::type_check(policy, version);
                        for (i, w) in warnings.into_iter().enumerate() {
                            report.push_problem(problem(
                                ProblemKind::Warning,
                                at.0,
                                at.1,
                                format!("status.typeChecking.expressionWarnings[{i}]"),
                                format!(
                                    "ValidatingAdmissionPolicy {:?}: {}: {}",
                                    policy.name,
                                    w.field_ref,
                                    w.warning.trim_end()
                                ),
                            ));
                        }
                    }
                    seen.accepted += 1;
                    for (_, objects) in &mut policies_by_file {
                        objects
                            .retain(|o| o.kind() != l.object.kind() || o.name() != l.object.name());
                    }
                    if let Some((_, objects)) = policies_by_file.last_mut() {
                        objects.push(l.object.clone());
                    }
                    policies.insert(l.object);
                }
            }
        }
        if seen.accepted == 0 {
            report.push_problem(unusable(path, seen.why_unusable(path)));
        } else if !seen.other_kinds.is_empty() {
            skipped.push(format!("{}: {}", path.display(), seen.other_kinds));
        }
    }
    Configurations {
        by_file,
        skipped,
        policies,
        policies_by_file,
    }
}

/// `file`'s entry among the policies by file, added when it is not the last one.
fn policy_file_entry(file: &str, by_file: &mut Vec<(String, Vec<PolicyObject>)>) {
    if by_file.last().is_none_or(|(f, _)| f != file) {
        by_file.push((file.to_string(), Vec::new()));
    }
}

/// The index of `file`'s entry, added when it is not the last one.
fn file_entry(file: &str, by_file: &mut ByFile) -> usize {
    if by_file.last().is_none_or(|(f, _)| f != file) {
        by_file.push((file.to_string(), Vec::new()));
    }
    by_file.len() - 1
}

/// A problem of `file`'s document `index` (1-based; 0: the file as a whole).
fn problem(kind: ProblemKind, file: &str, index: usize, field: String, message: String) -> Problem {
    Problem {
        kind,
        source: SourceRef {
            file: file.to_string(),
            index,
            unit: IndexUnit::Document,
            audit_id: None,
            line: None,
        },
        field,
        message,
    }
}

/// A `--webhooks` path that yields nothing usable.
fn unusable(path: &Path, message: String) -> Problem {
    let file = path.display().to_string();
    problem(ProblemKind::Unusable, &file, 0, String::new(), message)
}

/// The warning for `cfg`, which replaces the configuration of the same kind and name read
/// `earlier`: one object per kind and name exists in a cluster, and `kubectl apply` of both
/// files in this order leaves the later.
pub(crate) fn replaces(cfg: &WebhookConfiguration, earlier: &config::Source) -> String {
    format!(
        "{} {:?} replaces the one of {}: a cluster holds one object per kind and name, and applying both files in this order leaves this one",
        cfg.kind.configuration_kind(),
        cfg.name,
        earlier
    )
}

/// What one `--webhooks` path yielded.
#[derive(Default)]
struct Seen {
    documents: usize,
    accepted: usize,
    left_out: usize,
    /// The first document left out, with why.
    first_left_out: Option<String>,
    /// Why the path itself could not be read.
    unreadable: Option<String>,
    /// Kinds found that are not webhook configurations, by mistake.
    kinds: Vec<String>,
    /// Objects of other kinds.
    other_kinds: OtherKinds,
}

impl Seen {
    fn left_out(&mut self, why: String) {
        self.left_out += 1;
        self.first_left_out.get_or_insert(why);
    }

    fn why_unusable(&self, path: &Path) -> String {
        if let Some(message) = &self.unreadable {
            return format!("cannot read --webhooks path: {message}");
        }
        let kinds = self.kinds.iter().chain(self.other_kinds.kinds());
        if let Some(what) = captured_requests(path, kinds) {
            return format!(
                "holds {what}, not webhook configurations: give it with --input, and the configurations with --webhooks"
            );
        }
        if self.left_out == 0 && !self.other_kinds.is_empty() {
            return format!("no webhook configuration: {}", self.other_kinds);
        }
        if self.documents == 0 {
            return if path.is_dir() {
                "no webhook configuration: the folder holds no *.yaml, *.yml or *.json file".into()
            } else {
                "no webhook configuration: the file is empty".into()
            };
        }
        let (n, first) = (self.left_out, self.first_left_out.as_deref());
        format!(
            "no webhook configuration the apiserver would accept: {n} document{} left out (the first: {})",
            if n == 1 { "" } else { "s" },
            first.unwrap_or_default()
        )
    }
}

/// What kind of capture a `--webhooks` path holds, if it looks like one: documents of a
/// capture's kind, or a first line that is an audit event or AdmissionReview in JSON.
fn captured_requests<'k>(
    path: &Path,
    mut kinds: impl Iterator<Item = &'k String>,
) -> Option<&'static str> {
    let describe = |kind: &str| match kind {
        "Event" | "EventList" => Some("audit events"),
        "AdmissionReview" => Some("AdmissionReviews"),
        _ => None,
    };
    if let Some(what) = kinds.find_map(|k| describe(k)) {
        return Some(what);
    }
    if path.is_dir() {
        return None;
    }
    let mut head = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open(path).ok()?, 1 << 20),
        &mut head,
    )
    .ok()?;
    let line = head
        .split(|&b| b == b'\n')
        .map(<[u8]>::trim_ascii)
        .find(|l| !l.is_empty())?;
    let value: serde_json::Value = hookscope::json::from_slice(line).ok()?;
    describe(value.get("kind")?.as_str()?)
}

/// Objects of other kinds than webhook configurations, counted by kind in order of appearance.
#[derive(Debug, Default)]
pub(crate) struct OtherKinds(Vec<(String, usize)>);

impl OtherKinds {
    /// Counts one object of `kind`.
    pub fn add(&mut self, kind: &str) {
        match self.0.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n += 1,
            None => self.0.push((kind.to_string(), 1)),
        }
    }

    /// Whether none was counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn kinds(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }
}

/// `skipped 3 documents of other kinds: Namespace, CustomResourceDefinition ×2`.
impl std::fmt::Display for OtherKinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: usize = self.0.iter().map(|(_, n)| n).sum();
        let plural = if total == 1 { "" } else { "s" };
        write!(f, "skipped {total} document{plural} of other kinds: ")?;
        for (i, (kind, n)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            match n {
                1 => write!(f, "{sep}{kind}")?,
                n => write!(f, "{sep}{kind} ×{n}")?,
            }
        }
        Ok(())
    }
}
