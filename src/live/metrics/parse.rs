//! The Prometheus text exposition format 0.0.4, as kube-apiserver's `/metrics` serves it.
//!
//! Sample lines that prometheus-parse tokenizes correctly go through its line parser
//! ([`prometheus_parse::LineInfo`]); a cheap pre-scan sends every other line (escapes, `=`, `,`
//! or `}` inside label values, `:` in names, blanks inside the label set, `{}`, trailing
//! characters) and every comment line through an exact lexer of the format's grammar. Labels are
//! kept in the order written, and samples are grouped into families by their `# TYPE` the way
//! prometheus/common's `expfmt.TextParser` groups them (`_bucket`/`_sum`/`_count` belong to the
//! histogram or summary they name).

use std::collections::HashMap;

use prometheus_parse::LineInfo;
use thiserror::Error;

/// The `# TYPE` of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// `counter`
    Counter,
    /// `gauge`
    Gauge,
    /// `histogram`: `_bucket` samples with `le`, `_sum`, `_count`.
    Histogram,
    /// `summary`: samples with `quantile`, `_sum`, `_count`.
    Summary,
    /// `untyped`, or no `# TYPE` line.
    Untyped,
}

impl MetricKind {
    /// The keyword of the `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
            MetricKind::Summary => "summary",
            MetricKind::Untyped => "untyped",
        }
    }

    fn from_keyword(word: &str) -> Option<Self> {
        Some(match word {
            "counter" => MetricKind::Counter,
            "gauge" => MetricKind::Gauge,
            "histogram" => MetricKind::Histogram,
            "summary" => MetricKind::Summary,
            "untyped" => MetricKind::Untyped,
            _ => return None,
        })
    }
}

/// What a sample line is within its family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleRole {
    /// A counter's, gauge's or untyped metric's value.
    Value,
    /// A histogram `_bucket` line (cumulative count up to its `le` label).
    Bucket,
    /// A summary line with a `quantile` label.
    Quantile,
    /// A histogram's or summary's `_sum`.
    Sum,
    /// A histogram's or summary's `_count`.
    Count,
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample name as written, suffix included (`…_bucket`, `…_sum`, `…_count`).
    pub name: String,
    /// Label names and unescaped values, in the order written.
    pub labels: Vec<(String, String)>,
    /// The value (`NaN`, `+Inf` and `-Inf` included).
    pub value: f64,
    /// The optional timestamp, in milliseconds since the Unix epoch.
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    /// The value of label `name`, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A metric family: every sample that belongs to one name, with its `# HELP` and `# TYPE`.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The family name (for histograms and summaries, without `_bucket`/`_sum`/`_count`).
    pub name: String,
    /// The declared type; `Untyped` without a `# TYPE` line.
    pub kind: MetricKind,
    /// The unescaped `# HELP` text, if any.
    pub help: Option<String>,
    /// The samples in the order written.
    pub samples: Vec<Sample>,
}

impl Family {
    /// What `sample` (one of this family's samples) is within the family.
    pub fn role(&self, sample: &Sample) -> SampleRole {
        let suffix = sample.name.get(self.name.len()..).unwrap_or("");
        match (self.kind, suffix) {
            (MetricKind::Histogram, "_bucket") => SampleRole::Bucket,
            (MetricKind::Histogram | MetricKind::Summary, "_sum") => SampleRole::Sum,
            (MetricKind::Histogram | MetricKind::Summary, "_count") => SampleRole::Count,
            (MetricKind::Summary, "") => SampleRole::Quantile,
            _ => SampleRole::Value,
        }
    }
}

/// A parsed exposition: its families in the order they first appear.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// The families, in order of first appearance (a `# HELP`, `# TYPE` or sample line).
    pub families: Vec<Family>,
}

impl Exposition {
    /// The family called `name` (for histograms and summaries, the name without suffix).
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// Every sample with its family, in family order, then line order.
    pub fn samples(&self) -> impl Iterator<Item = (&Family, &Sample)> {
        self.families
            .iter()
            .flat_map(|f| f.samples.iter().map(move |s| (f, s)))
    }

    /// The number of sample lines.
    pub fn sample_count(&self) -> usize {
        self.families.iter().map(|f| f.samples.len()).sum()
    }
}

/// Why a line of the exposition is not valid text format 0.0.4.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseErrorKind {
    /// A metric name was expected (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
    #[error("invalid metric name")]
    InvalidMetricName,
    /// A label name was expected (`[a-zA-Z_][a-zA-Z0-9_]*`).
    #[error("invalid label name for metric {0:?}")]
    InvalidLabelName(String),
    /// The same label name twice in one sample.
    #[error("duplicate label name {label:?} for metric {metric:?}")]
    DuplicateLabel {
        /// The sample name.
        metric: String,
        /// The repeated label name.
        label: String,
    },
    /// After a label name, `="` was expected.
    #[error("expected '=\"' after label name {0:?}")]
    ExpectedLabelValue(String),
    /// A backslash followed by something other than `\`, `"` or `n`.
    #[error("invalid escape sequence '\\{0}'")]
    InvalidEscape(char),
    /// A label value without its closing quote.
    #[error("label value of {0:?} is not terminated")]
    UnterminatedLabelValue(String),
    /// After a label value, `,` or `}` was expected.
    #[error("expected ',' or '}}' after the value of label {0:?}")]
    ExpectedLabelSeparator(String),
    /// The sample has no value.
    #[error("missing value for metric {0:?}")]
    MissingValue(String),
    /// The value is not a float.
    #[error("expected float as value, got {0:?}")]
    InvalidValue(String),
    /// The timestamp is not an integer.
    #[error("expected integer as timestamp, got {0:?}")]
    InvalidTimestamp(String),
    /// Something follows the timestamp.
    #[error("spurious string after timestamp: {0:?}")]
    TrailingCharacters(String),
    /// A `# TYPE` keyword other than counter, gauge, histogram, summary, untyped.
    #[error("unknown metric type {0:?}")]
    UnknownType(String),
    /// A `# TYPE` line with no type.
    #[error("missing metric type for {0:?}")]
    MissingType(String),
    /// A second `# TYPE` line for a family, or one after its samples.
    #[error("second TYPE line for metric name {0:?}, or TYPE reported after samples")]
    DuplicateType(String),
    /// A second `# HELP` line for a family.
    #[error("second HELP line for metric name {0:?}")]
    DuplicateHelp(String),
    /// A histogram bucket's `le` or a summary's `quantile` that is not a float.
    #[error("expected float as value for {label:?} label, got {value:?}")]
    InvalidBound {
        /// `le` or `quantile`.
        label: String,
        /// The value found.
        value: String,
    },
}

/// A line of the exposition that is not valid text format 0.0.4.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("metrics text line {line}: {kind}")]
pub struct ParseError {
    /// The 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub kind: ParseErrorKind,
}

/// Parses exposition text (format 0.0.4). Sample lines that prometheus-parse reads correctly are
/// tokenized by it; every other line by the exact lexer. The first invalid line fails the whole
/// text, as a Prometheus scrape does.
pub fn parse(text: &str) -> Result<Exposition, ParseError> {
    parse_with(text, Route::Fast, None)
}

/// Parses only the families whose names start with one of `prefixes`, as [`parse`] parses them:
/// on text that [`parse`] accepts, the result is [`parse`]'s families with such names, in the same
/// order, sample for sample. Other lines are skipped by a scan of their first bytes, except
/// `# TYPE` lines, which decide the family of `_bucket`, `_sum` and `_count` samples. Skipped
/// lines are not validated, so an invalid line of another family is no error here; errors
/// name the line of the whole text.
pub fn parse_families(text: &str, prefixes: &[&str]) -> Result<Exposition, ParseError> {
    parse_with(text, Route::Fast, Some(prefixes))
}

/// Parses like [`parse`] but sends every line through the exact lexer (no prometheus-parse):
/// the reference the fast path is checked against, and a comparison point for its speed.
pub fn parse_exact(text: &str) -> Result<Exposition, ParseError> {
    parse_with(text, Route::Exact, None)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    Fast,
    Exact,
}

/// One tokenized sample line.
struct RawSample<'a> {
    name: &'a str,
    labels: Vec<(String, String)>,
    value: f64,
    timestamp_ms: Option<i64>,
}

/// One tokenized line.
enum Line<'a> {
    Blank,
    Help(&'a str, String),
    Type(&'a str, MetricKind),
    Sample(RawSample<'a>),
}

fn parse_with(text: &str, route: Route, only: Option<&[&str]>) -> Result<Exposition, ParseError> {
    let mut builder = Builder::default();
    for (i, line) in text.split('\n').enumerate() {
        if let Some(prefixes) = only
            && !wanted(line.as_bytes(), prefixes)
        {
            continue;
        }
        let at = |kind| ParseError { line: i + 1, kind };
        let tokens = if route == Route::Fast && fast_path_safe(line.as_bytes()) {
            fast_sample(line)
        } else {
            exact_line(line)
        };
        builder.add(tokens.map_err(at)?).map_err(at)?;
    }
    let mut exposition = builder.finish();
    if let Some(prefixes) = only {
        exposition
            .families
            .retain(|f| prefixes.iter().any(|p| f.name.starts_with(p)));
    }
    Ok(exposition)
}

/// Whether a filtered parse reads `line`: every `# TYPE` line, and `# HELP` and sample lines
/// whose metric name starts with one of `prefixes`. A sample belongs to the family of its own
/// name or of its name less a suffix, so every line of a wanted family starts with its prefix.
fn wanted(line: &[u8], prefixes: &[&str]) -> bool {
    let named = |rest: &[u8]| prefixes.iter().any(|p| rest.starts_with(p.as_bytes()));
    let line = trim_blanks_start(line);
    match line.split_first() {
        Some((b'#', rest)) => {
            let rest = trim_blanks_start(rest);
            match rest.strip_prefix(b"HELP") {
                Some(help) => named(trim_blanks_start(help)),
                None => rest.starts_with(b"TYPE"),
            }
        }
        Some(_) => named(line),
        None => false,
    }
}

fn trim_blanks_start(bytes: &[u8]) -> &[u8] {
    let blanks = bytes.iter().take_while(|&&b| is_blank(b)).count();
    &bytes[blanks..]
}

#[derive(Default)]
struct Builder {
    families: Vec<Family>,
    by_name: HashMap<String, usize>,
    /// Families whose kind came from a `# TYPE` line or a first sample.
    typed: Vec<bool>,
}

impl Builder {
    fn add(&mut self, line: Line<'_>) -> Result<(), ParseErrorKind> {
        match line {
            Line::Blank => {}
            Line::Help(name, help) => {
                let i = self.family_exact(name);
                if self.families[i].help.is_some() {
                    return Err(ParseErrorKind::DuplicateHelp(name.to_owned()));
                }
                self.families[i].help = Some(help);
            }
            Line::Type(name, kind) => {
                let i = self.family_exact(name);
                if self.typed[i] {
                    return Err(ParseErrorKind::DuplicateType(name.to_owned()));
                }
                self.typed[i] = true;
                self.families[i].kind = kind;
            }
            Line::Sample(raw) => {
                let i = self.family_of_sample(raw.name);
                self.typed[i] = true;
                let family = &mut self.families[i];
                let bound = match (family.kind, raw.name.len() == family.name.len()) {
                    (MetricKind::Histogram, false) if raw.name.ends_with("_bucket") => Some("le"),
                    (MetricKind::Summary, true) => Some("quantile"),
                    _ => None,
                };
                if let Some(label) = bound
                    && let Some((_, v)) = raw.labels.iter().find(|(k, _)| k == label)
                    && parse_go_float(v).is_none()
                {
                    return Err(ParseErrorKind::InvalidBound {
                        label: label.to_owned(),
                        value: v.clone(),
                    });
                }
                family.samples.push(Sample {
                    name: raw.name.to_owned(),
                    labels: raw.labels,
                    value: raw.value,
                    timestamp_ms: raw.timestamp_ms,
                });
            }
        }
        Ok(())
    }

    /// The family called exactly `name`, created if absent.
    fn family_exact(&mut self, name: &str) -> usize {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        self.families.push(Family {
            name: name.to_owned(),
            kind: MetricKind::Untyped,
            help: None,
            samples: Vec::new(),
        });
        self.typed.push(false);
        self.by_name
            .insert(name.to_owned(), self.families.len() - 1);
        self.families.len() - 1
    }

    /// expfmt's rule: the family of the exact name; else the summary named without
    /// `_sum`/`_count`; else the histogram named without `_bucket`/`_sum`/`_count`; else a new
    /// family of the exact name.
    fn family_of_sample(&mut self, name: &str) -> usize {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        let base = |suffixes: &[&str]| suffixes.iter().find_map(|s| name.strip_suffix(s));
        if let Some(b) = base(&["_sum", "_count"])
            && let Some(&i) = self.by_name.get(b)
            && self.families[i].kind == MetricKind::Summary
        {
            return i;
        }
        if let Some(b) = base(&["_bucket", "_sum", "_count"])
            && let Some(&i) = self.by_name.get(b)
            && self.families[i].kind == MetricKind::Histogram
        {
            return i;
        }
        self.family_exact(name)
    }

    fn finish(self) -> Exposition {
        Exposition {
            families: self.families,
        }
    }
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn is_label_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_label_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_name_start(b: u8) -> bool {
    is_label_start(b) || b == b':'
}

fn is_name_char(b: u8) -> bool {
    is_label_char(b) || b == b':'
}

/// Whether prometheus-parse tokenizes this line exactly as the format defines it: a sample line
/// whose name is `\w+` without `:`, whose labels are `name="value"` pairs separated by single
/// commas with no blank, no `\`, `"`, `=`, `,` or `}` inside a value, and whose value and
/// timestamp are plain number tokens separated by blanks. Everything else (comments included)
/// is not.
fn fast_path_safe(line: &[u8]) -> bool {
    let mut i = 0;
    if !line.first().is_some_and(|&b| is_label_start(b)) {
        return false;
    }
    while i < line.len() && is_label_char(line[i]) {
        i += 1;
    }
    if line.get(i) == Some(&b'{') {
        i += 1;
        loop {
            let start = i;
            while i < line.len() && is_label_char(line[i]) {
                i += 1;
            }
            if i == start || !is_label_start(line[start]) || line.get(i..i + 2) != Some(b"=\"") {
                return false;
            }
            i += 2;
            while i < line.len() && !matches!(line[i], b'"' | b'\\' | b'=' | b',' | b'}') {
                i += 1;
            }
            if line.get(i) != Some(&b'"') {
                return false;
            }
            i += 1;
            match line.get(i) {
                Some(b',') => i += 1,
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return false,
            }
        }
    }
    if !line.get(i).is_some_and(|&b| is_blank(b)) {
        return false;
    }
    let rest = &line[i..];
    let number = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-');
    let tokens = rest
        .split(|&b| is_blank(b))
        .filter(|t| !t.is_empty())
        .try_fold(0, |n, t| t.iter().all(number).then_some(n + 1));
    matches!(tokens, Some(1 | 2))
}

/// A sample line the pre-scan admitted, tokenized by prometheus-parse. Its label string has the
/// shape `name="value"(,name="value")*` with no separator inside a value, so splitting it at
/// commas and at the first `=` is exact.
fn fast_sample(line: &str) -> Result<Line<'_>, ParseErrorKind> {
    let LineInfo::Sample {
        metric_name,
        labels,
        value,
        timestamp,
    } = LineInfo::parse(line)
    else {
        // The pre-scan admits only lines its sample pattern matches; the lexer explains others.
        return exact_line(line);
    };
    let mut pairs = Vec::with_capacity(8);
    for pair in labels.unwrap_or("").split(',') {
        if let Some((k, v)) = pair.split_once('=') {
            let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
            pairs.push((k.to_owned(), v.unwrap_or_default().to_owned()));
        }
    }
    check_duplicates(metric_name, &pairs)?;
    Ok(Line::Sample(RawSample {
        name: metric_name,
        labels: pairs,
        value: sample_value(value)?,
        timestamp_ms: timestamp.map(sample_timestamp).transpose()?,
    }))
}

fn check_duplicates(metric: &str, labels: &[(String, String)]) -> Result<(), ParseErrorKind> {
    for (i, (k, _)) in labels.iter().enumerate() {
        if labels[..i].iter().any(|(seen, _)| seen == k) {
            return Err(ParseErrorKind::DuplicateLabel {
                metric: metric.to_owned(),
                label: k.clone(),
            });
        }
    }
    Ok(())
}

fn sample_value(token: &str) -> Result<f64, ParseErrorKind> {
    parse_go_float(token).ok_or_else(|| ParseErrorKind::InvalidValue(token.to_owned()))
}

fn sample_timestamp(token: &str) -> Result<i64, ParseErrorKind> {
    token
        .parse::<i64>()
        .map_err(|_| ParseErrorKind::InvalidTimestamp(token.to_owned()))
}

/// Go's `strconv.ParseFloat(s, 64)` for decimal input: Rust's parser plus Go's refusal of a
/// signed NaN. (Go's hexadecimal floats are not accepted.)
pub(crate) fn parse_go_float(s: &str) -> Option<f64> {
    let unsigned = s.strip_prefix(['+', '-']);
    if unsigned.is_some_and(|u| u.eq_ignore_ascii_case("nan")) {
        return None;
    }
    s.parse::<f64>().ok()
}

/// A cursor over one line for the exact lexer.
struct Cursor<'a> {
    line: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.line.as_bytes().get(self.pos).copied()
    }

    fn skip_blanks(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(is_blank) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.pos += 1;
        }
        &self.line[start..self.pos]
    }

    fn token(&mut self) -> &'a str {
        self.take_while(|b| !is_blank(b))
    }

    fn rest(&self) -> &'a str {
        &self.line[self.pos..]
    }

    fn metric_name(&mut self) -> Option<&'a str> {
        if !self.peek().is_some_and(is_name_start) {
            return None;
        }
        Some(self.take_while(is_name_char))
    }
}

/// The exact lexer: one line of text format 0.0.4 (prometheus/common `expfmt` text grammar).
fn exact_line(line: &str) -> Result<Line<'_>, ParseErrorKind> {
    let mut c = Cursor { line, pos: 0 };
    c.skip_blanks();
    match c.peek() {
        None => Ok(Line::Blank),
        Some(b'#') => {
            c.pos += 1;
            c.skip_blanks();
            comment(&mut c)
        }
        Some(_) => sample(&mut c).map(Line::Sample),
    }
}

/// After `#`: a `HELP` or `TYPE` line, or any other comment (ignored).
fn comment<'a>(c: &mut Cursor<'a>) -> Result<Line<'a>, ParseErrorKind> {
    let keyword = c.token();
    if keyword != "HELP" && keyword != "TYPE" {
        return Ok(Line::Blank);
    }
    if c.skip_blanks() == 0 {
        return Ok(Line::Blank);
    }
    let name = c.metric_name().ok_or(ParseErrorKind::InvalidMetricName)?;
    if c.peek().is_some_and(|b| !is_blank(b)) {
        return Err(ParseErrorKind::InvalidMetricName);
    }
    c.skip_blanks();
    if keyword == "HELP" {
        return Ok(Line::Help(name, unescape_help(c.rest())?));
    }
    let word = c.token();
    if word.is_empty() {
        return Err(ParseErrorKind::MissingType(name.to_owned()));
    }
    let kind = MetricKind::from_keyword(word)
        .ok_or_else(|| ParseErrorKind::UnknownType(word.to_owned()))?;
    c.skip_blanks();
    if !c.rest().is_empty() {
        return Err(ParseErrorKind::TrailingCharacters(c.rest().to_owned()));
    }
    Ok(Line::Type(name, kind))
}

/// HELP text escapes: `\\` and `\n`.
fn unescape_help(text: &str) -> Result<String, ParseErrorKind> {
    if !text.contains('\\') {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some(other) => return Err(ParseErrorKind::InvalidEscape(other)),
            None => return Err(ParseErrorKind::InvalidEscape(' ')),
        }
    }
    Ok(out)
}

fn sample<'a>(c: &mut Cursor<'a>) -> Result<RawSample<'a>, ParseErrorKind> {
    let name = c.metric_name().ok_or(ParseErrorKind::InvalidMetricName)?;
    let mut labels = Vec::new();
    c.skip_blanks();
    if c.peek() == Some(b'{') {
        c.pos += 1;
        label_set(c, name, &mut labels)?;
        c.skip_blanks();
    }
    let value = c.token();
    if value.is_empty() {
        return Err(ParseErrorKind::MissingValue(name.to_owned()));
    }
    let value = sample_value(value)?;
    c.skip_blanks();
    let timestamp = c.token();
    let timestamp_ms = if timestamp.is_empty() {
        None
    } else {
        Some(sample_timestamp(timestamp)?)
    };
    c.skip_blanks();
    if !c.rest().is_empty() {
        return Err(ParseErrorKind::TrailingCharacters(c.rest().to_owned()));
    }
    check_duplicates(name, &labels)?;
    Ok(RawSample {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

/// After `{`: `name="value"` pairs separated by commas (a trailing comma allowed), blanks
/// between tokens, up to `}`.
fn label_set(
    c: &mut Cursor<'_>,
    metric: &str,
    labels: &mut Vec<(String, String)>,
) -> Result<(), ParseErrorKind> {
    loop {
        c.skip_blanks();
        if c.peek() == Some(b'}') {
            c.pos += 1;
            return Ok(());
        }
        if !c.peek().is_some_and(is_label_start) {
            return Err(ParseErrorKind::InvalidLabelName(metric.to_owned()));
        }
        let label = c.take_while(is_label_char);
        c.skip_blanks();
        if c.peek() != Some(b'=') {
            return Err(ParseErrorKind::ExpectedLabelValue(label.to_owned()));
        }
        c.pos += 1;
        c.skip_blanks();
        if c.peek() != Some(b'"') {
            return Err(ParseErrorKind::ExpectedLabelValue(label.to_owned()));
        }
        c.pos += 1;
        let value = label_value(c, label)?;
        labels.push((label.to_owned(), value));
        c.skip_blanks();
        match c.peek() {
            Some(b',') => c.pos += 1,
            Some(b'}') => {
                c.pos += 1;
                return Ok(());
            }
            _ => return Err(ParseErrorKind::ExpectedLabelSeparator(label.to_owned())),
        }
    }
}

/// After the opening quote: the value up to the closing quote, with `\\`, `\"` and `\n`
/// unescaped.
fn label_value(c: &mut Cursor<'_>, label: &str) -> Result<String, ParseErrorKind> {
    let rest = c.rest();
    let mut out = String::new();
    let mut chars = rest.char_indices();
    let mut plain_from = 0;
    while let Some((i, ch)) = chars.next() {
        match ch {
            '"' => {
                out.push_str(&rest[plain_from..i]);
                c.pos += i + 1;
                return Ok(out);
            }
            '\\' => {
                out.push_str(&rest[plain_from..i]);
                match chars.next() {
                    Some((_, '\\')) => out.push('\\'),
                    Some((_, '"')) => out.push('"'),
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, other)) => return Err(ParseErrorKind::InvalidEscape(other)),
                    None => break,
                }
                plain_from = chars.offset();
            }
            _ => {}
        }
    }
    Err(ParseErrorKind::UnterminatedLabelValue(label.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_scan_admits_plain_lines_only() {
        assert!(fast_path_safe(br#"a{b="c",d="e"} 1"#));
        assert!(fast_path_safe(b"a 1 1700000000000"));
        assert!(fast_path_safe(br#"a_bucket{le="+Inf"} NaN"#));
        for line in [
            r#"a{sel="app=web"} 1"#,
            r#"a{x="1,2"} 1"#,
            r#"a{m="\"q\""} 1"#,
            r#"a{b="{x}"} 1"#,
            "ns:rec 1",
            "a{} 1",
            r#"a{b="c", d="e"} 1"#,
            r#"a{b="c",} 1"#,
            "a 1 2 3x!",
            "a 1 2 3",
            "a",
            "# TYPE a counter",
            " a 1",
        ] {
            assert!(!fast_path_safe(line.as_bytes()), "{line}");
        }
    }

    #[test]
    fn go_floats() {
        assert_eq!(parse_go_float("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_go_float("-Inf"), Some(f64::NEG_INFINITY));
        assert!(parse_go_float("NaN").is_some_and(f64::is_nan));
        assert_eq!(parse_go_float("-nan"), None);
        assert_eq!(parse_go_float("2.5e-05"), Some(2.5e-05));
        assert_eq!(parse_go_float("x"), None);
    }
}
