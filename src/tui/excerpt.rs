//! A read-only look at a file around one position: what `enter` on a Problems row of a replay
//! input (an invalid line, a request that cannot be replayed) opens. The file is read by the
//! event loop ([`read`], IO), only as far as the position and a window around it, so a
//! gigabyte audit log opens as fast as its first lines do.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::replay::IndexUnit;

/// Lines shown before the problem's line.
pub const BEFORE: usize = 50;
/// Lines shown after it.
pub const AFTER: usize = 200;
/// Characters kept of one line (an audit event is one long line).
pub const LINE_CHARS: usize = 4000;

/// Lines of a file around a problem's position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt {
    /// The file.
    pub path: PathBuf,
    /// The 1-based line of the position.
    pub line: usize,
    /// The 1-based line of `lines[0]`.
    pub first: usize,
    /// The lines read (each cut at [`LINE_CHARS`]).
    pub lines: Vec<String>,
    /// How the position was placed: `line 3`, `document 2 (line 14)`.
    pub place: String,
    /// The problem's reason, shown under the text.
    pub reason: String,
}

/// Reads `path` around the `index`-th (1-based; 0: the file as a whole, its top) line or
/// document. A document of a YAML stream starts after its `---`; one of a JSON stream at its
/// first character.
pub fn read(path: &Path, unit: IndexUnit, index: usize) -> Result<Excerpt, String> {
    let named = |e: std::io::Error| format!("{}: {e}", path.display());
    let line = match unit {
        IndexUnit::Line => index.max(1),
        IndexUnit::Document if index <= 1 => 1,
        IndexUnit::Document => document_line(path, index).map_err(named)?,
    };
    let file = std::fs::File::open(path).map_err(named)?;
    let first = line.saturating_sub(BEFORE).max(1);
    let mut lines = Vec::new();
    let mut raw = Vec::new();
    let mut reader = std::io::BufReader::new(file);
    let mut n = 0;
    loop {
        raw.clear();
        if reader.read_until(b'\n', &mut raw).map_err(named)? == 0 {
            break;
        }
        n += 1;
        if n < first {
            continue;
        }
        let text = String::from_utf8_lossy(&raw);
        let text = text.trim_end_matches(['\n', '\r']);
        lines.push(text.chars().take(LINE_CHARS).collect());
        if n >= line + AFTER {
            break;
        }
    }
    if n < line {
        return Err(format!(
            "{} has {n} lines: line {line} is not there any more",
            path.display()
        ));
    }
    let place = match unit {
        IndexUnit::Line => format!("line {line}"),
        IndexUnit::Document if index == 0 => "the whole file".to_string(),
        IndexUnit::Document => format!("document {index} (line {line})"),
    };
    Ok(Excerpt {
        path: path.to_path_buf(),
        line,
        first,
        lines,
        place,
        reason: String::new(),
    })
}

/// The 1-based line where the `n`-th (1-based, n ≥ 2) document of a YAML or JSON stream starts.
fn document_line(path: &Path, n: usize) -> std::io::Result<usize> {
    let text = std::fs::read(path)?;
    let yaml = text
        .split(|b| *b == b'\n')
        .any(|l| l == b"---" || l.starts_with(b"--- ") || l == b"---\r");
    if yaml {
        let mut seen = 0;
        for (i, l) in text.split(|b| *b == b'\n').enumerate() {
            if l == b"---" || l.starts_with(b"--- ") || l == b"---\r" {
                // A leading separator opens the first document.
                if i == 0 {
                    continue;
                }
                seen += 1;
                if seen == n - 1 {
                    return Ok(i + 2);
                }
            }
        }
        return Ok(1);
    }
    // A JSON stream: the document after the (n-1)-th value's end.
    let mut values =
        serde_json::Deserializer::from_slice(&text).into_iter::<serde::de::IgnoredAny>();
    for _ in 0..n - 1 {
        if values.next().is_none_or(|v| v.is_err()) {
            return Ok(1);
        }
    }
    let end = values.byte_offset();
    let start = end
        + text[end..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(0);
    Ok(1 + text[..start].iter().filter(|b| **b == b'\n').count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_documents_are_placed_at_their_line() {
        let dir = std::env::temp_dir().join(format!("hookscope-excerpt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let jsonl = dir.join("in.jsonl");
        let body: String = (1..=400).map(|i| format!("{{\"n\":{i}}}\n")).collect();
        std::fs::write(&jsonl, body).unwrap();
        let e = read(&jsonl, IndexUnit::Line, 300).unwrap();
        assert_eq!((e.line, e.first), (300, 250));
        assert_eq!(e.lines[300 - e.first], "{\"n\":300}");
        assert_eq!(e.lines.len(), 400 - 250 + 1, "to the end of a short file");
        assert!(read(&jsonl, IndexUnit::Line, 401).is_err());

        let yaml = dir.join("in.yaml");
        std::fs::write(&yaml, "a: 1\n---\nb: 2\nc: 3\n---\nd: 4\n").unwrap();
        let e = read(&yaml, IndexUnit::Document, 3).unwrap();
        assert_eq!(e.line, 6);
        assert_eq!(e.lines[e.line - e.first], "d: 4");

        let json = dir.join("in.json");
        std::fs::write(&json, "{\"a\": 1}\n\n{\n  \"b\": 2\n}\n{\"c\": 3}\n").unwrap();
        let e = read(&json, IndexUnit::Document, 2).unwrap();
        assert_eq!(e.lines[e.line - e.first], "{");
        assert_eq!(e.line, 3);
        let e = read(&json, IndexUnit::Document, 3).unwrap();
        assert_eq!(e.lines[e.line - e.first], "{\"c\": 3}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
