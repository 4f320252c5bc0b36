//! JUnit XML for CI: one test case per replayed request. A case fails when an `--expect` entry
//! does not hold for it; requests that could not be replayed are skipped cases, unreadable input
//! an error case. A denial alone is not a failure: it is the replay's answer, printed in the
//! case's output.

use std::fmt::Write as _;

use super::expect::Mismatch;
use super::report::{Problem, ProblemKind, RequestReport};

#[derive(Debug, Clone)]
enum Case {
    Request {
        name: String,
        class: String,
        seconds: f64,
        out: String,
        failures: Vec<String>,
    },
    Problem {
        name: String,
        class: String,
        kind: ProblemKind,
        message: String,
    },
}

/// Collects test cases and renders the document.
#[derive(Debug, Clone, Default)]
pub struct JUnit {
    cases: Vec<Case>,
}

/// Escapes text for XML attributes and content.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            c if (c as u32) < 0x20 && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

impl JUnit {
    /// Adds the case of a replayed request.
    pub fn request(&mut self, r: &RequestReport, mismatches: &[Mismatch]) {
        let count = |phase: &str| r.calls.iter().filter(|c| c.phase == phase).count();
        let (validating, mutating) = (count("validatingPolicy"), count("mutatingPolicy"));
        let out = match &r.status {
            None => {
                // The webhooks called, not those only considered and skipped.
                let called = (r.calls.iter())
                    .filter(|c| c.decision != "skipped" && !c.phase.ends_with("Policy"))
                    .count();
                let mut parts = vec![format!(
                    "{called} webhook call{}",
                    if called == 1 { "" } else { "s" }
                )];
                if mutating > 0 {
                    parts.push(format!("{mutating} mutating admission policy bindings"));
                }
                if validating > 0 {
                    parts.push(format!("{validating} validating admission policy bindings"));
                }
                format!("allowed ({})", parts.join(", "))
            }
            Some(s) => format!("denied {}: {}", s.code, s.message),
        };
        self.cases.push(Case::Request {
            name: format!("{} {}", r.source.index, r.title()),
            class: r.source.file.clone(),
            seconds: r.calls.iter().map(|c| c.duration_ms).sum::<f64>() / 1000.0,
            out,
            failures: mismatches.iter().map(ToString::to_string).collect(),
        });
    }

    /// Adds the case of an input item that was not replayed.
    pub fn problem(&mut self, p: &Problem) {
        let name = match p.source.index {
            // The input as a whole.
            0 => "whole input".to_string(),
            i => format!("{i} {}", p.field),
        };
        self.cases.push(Case::Problem {
            name,
            class: p.source.file.clone(),
            kind: p.kind,
            message: p.message.clone(),
        });
    }

    /// The document.
    pub fn render(&self, extra_failures: &[Mismatch]) -> String {
        let (mut failures, mut errors, mut skipped) = (0, 0, 0);
        let mut body = String::new();
        for case in &self.cases {
            match case {
                Case::Request {
                    name,
                    class,
                    seconds,
                    out,
                    failures: f,
                } => {
                    let _ = writeln!(
                        body,
                        "    <testcase name=\"{}\" classname=\"{}\" time=\"{seconds:.6}\">",
                        esc(name),
                        esc(class)
                    );
                    if !f.is_empty() {
                        failures += 1;
                        let _ = writeln!(
                            body,
                            "      <failure message=\"{} expectation(s) not met\" type=\"expectation\">{}</failure>",
                            f.len(),
                            esc(&f.join("\n"))
                        );
                    }
                    let _ = writeln!(body, "      <system-out>{}</system-out>", esc(out));
                    body.push_str("    </testcase>\n");
                }
                Case::Problem {
                    name,
                    class,
                    kind,
                    message,
                } => {
                    let _ = writeln!(
                        body,
                        "    <testcase name=\"{}\" classname=\"{}\" time=\"0\">",
                        esc(name),
                        esc(class)
                    );
                    if *kind == ProblemKind::NotReplayable {
                        skipped += 1;
                        let _ = writeln!(body, "      <skipped message=\"{}\"/>", esc(message));
                    } else {
                        errors += 1;
                        let _ = writeln!(
                            body,
                            "      <error message=\"{}\" type=\"input\"/>",
                            esc(message)
                        );
                    }
                    body.push_str("    </testcase>\n");
                }
            }
        }
        for m in extra_failures {
            failures += 1;
            let _ = write!(
                body,
                "    <testcase name=\"expectation {}\" classname=\"expectations\" time=\"0\">\n      <failure message=\"{}\" type=\"expectation\">{}</failure>\n    </testcase>\n",
                m.entry,
                esc(&m.actual),
                esc(&m.to_string())
            );
        }
        let tests = self.cases.len() + extra_failures.len();
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"hookscope replay\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n  <testsuite name=\"hookscope replay\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n{body}  </testsuite>\n</testsuites>\n"
        )
    }
}
