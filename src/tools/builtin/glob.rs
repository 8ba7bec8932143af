//! `glob` (spec §1.7): files matching a glob, recently modified first.
//!
//! Matching follows pathlib's rules as the reference uses them: `*`, `?` and `[...]` stay inside
//! one path segment, `**` as a whole segment spans any number of directories, dot files are
//! matched, case is significant, and nothing is skipped (no `.gitignore`, `.git` or
//! `node_modules` filtering). Symlinked directories are not descended into, and the pattern's
//! literal head must resolve inside the workspace unless reads outside are allowed.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use globset::GlobBuilder;
use serde_json::{Map, Value};

use super::{arg_str, required_str, tool_metadata, ReadTarget, Tool, ToolContext, ToolError};
use crate::permissions::listed_paths::Listed;
use crate::permissions::path_policy;

/// Files modified within this many seconds are listed first, newest first.
const RECENCY_THRESHOLD: f64 = 86_400.0;

pub(crate) struct Glob;

impl Tool for Glob {
    tool_metadata! {
        name: "glob",
        read_only: true,
        description: "Find files matching a glob pattern (e.g., '*.py', '**/*.txt'). Supports recursive search with '**'.",
        parameters: {"type": "object", "properties": {
            "pattern": {"type": "string", "description": "Glob pattern to match files (e.g., '*.py', 'src/**/*.js')"},
            "directory": {"type": "string", "description": "Directory to search. Default: the working directory.", "default": "."}},
            "required": ["pattern"]},
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let pattern = required_str(args, "pattern", "glob")?;
        let directory = arg_str(args, "directory")?.unwrap_or(".");
        let path = match ctx.existing_for_read(directory, ReadTarget::Directory) {
            Ok(p) => p,
            Err(text) => return Ok(text),
        };
        let matches = match find(ctx, &path, pattern) {
            Ok(m) => m,
            Err(FindError::Outside(msg)) => return Ok(format!("Error: {msg}")),
            Err(FindError::Other(e)) => return Ok(format!("Error finding files: {e}")),
        };
        if matches.is_empty() {
            return Ok(format!("No files found matching pattern: {pattern}"));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let (mut recent, mut older): (Vec<_>, Vec<_>) = matches
            .into_iter()
            .partition(|(_, mtime)| now - mtime < RECENCY_THRESHOLD);
        recent.sort_by(|a, b| b.1.total_cmp(&a.1));
        older.sort_by(|a, b| a.0.cmp(&b.0));
        let n = recent.len() + older.len();
        let list: Vec<String> = recent.into_iter().chain(older).map(|(p, _)| p).collect();
        Ok(format!("Found {n} file(s):\n\n{}", list.join("\n")))
    }
}

/// Why [`find`] found nothing to list.
pub(crate) enum FindError {
    /// The pattern reaches outside the workspace (the path policy's refusal text).
    Outside(String),
    Other(String),
}

/// `(relative path, mtime)` of every file under `base` matching `pattern`.
pub(crate) fn find(
    ctx: &ToolContext<'_>,
    base: &Path,
    pattern: &str,
) -> Result<Vec<(String, f64)>, FindError> {
    if pattern.is_empty() {
        return Err(FindError::Other("Unacceptable pattern: ''".to_owned()));
    }
    if pattern.starts_with('/') {
        return Err(FindError::Other(
            "Non-relative patterns are unsupported".to_owned(),
        ));
    }
    let pattern = pattern.trim_end_matches('/');
    let segments: Vec<&str> = pattern
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let glob = GlobBuilder::new(&segments.join("/"))
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| FindError::Other(e.kind().to_string()))?
        .compile_matcher();
    // Walk only below the literal head, and only as deep as the pattern reaches.
    let is_magic = |s: &str| s.contains(['*', '?', '[', '{']);
    let head: Vec<&str> = segments
        .iter()
        .take_while(|s| !is_magic(s))
        .copied()
        .collect();
    let rest = &segments[head.len()..];
    let max_depth = if rest.iter().any(|s| s.contains("**")) {
        None
    } else {
        Some(rest.len().max(1))
    };
    let start = head.iter().fold(base.to_path_buf(), |p, s| p.join(s));
    // The literal head may climb out (`../../etc/*`) or name a symlinked directory: resolved
    // the way read_file resolves, it must stay inside. The walk below it follows no links.
    if !ctx.settings.allow_reads_outside_workspace {
        let resolved = path_policy::resolve(&start);
        if !resolved.starts_with(ctx.workspace) {
            return Err(FindError::Outside(path_policy::refusal(
                pattern,
                &resolved,
                ctx.workspace,
            )));
        }
    }
    let fs = ctx.services.fs();
    let mut out = Vec::new();
    if rest.is_empty() {
        // A literal path: it matches itself when it is a file.
        if let Ok(stat) = fs.stat(&start) {
            if stat.is_file {
                out.push((head.join("/"), stat.mtime));
            }
        }
        return Ok(out);
    }
    if !fs.is_dir(&start) {
        return Ok(out);
    }
    let stop = || ctx.cancel.is_cancelled();
    let entries = fs
        .walk(&start, max_depth, &stop)
        .map_err(|e| FindError::Other(e.to_string()))?;
    let mut listed = ctx.listed_paths();
    for entry in entries {
        if !entry.is_file || listed.check(&entry.path) != Listed::Inside {
            continue;
        }
        let Ok(rel) = entry.path.strip_prefix(base) else {
            continue;
        };
        let rel = rel.to_string_lossy();
        if glob.is_match(rel.as_ref()) {
            let mtime = fs.stat(&entry.path).map(|s| s.mtime).unwrap_or(0.0);
            out.push((rel.into_owned(), mtime));
        }
    }
    Ok(out)
}
