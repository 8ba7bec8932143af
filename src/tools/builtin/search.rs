//! `search_file_content` (spec §1.8): one in-process engine (ripgrep's `ignore` walker and
//! `grep-searcher`) instead of the reference's git grep → rg → Python chain.
//!
//! - `.gitignore` (and `.ignore`, `.git/info/exclude`) are honoured inside a git work tree, as
//!   git grep does; when the searched directory is itself git-ignored, VCS ignore rules are
//!   switched off for the call (the reference's "explicitly named ignored directory is still
//!   searched" rule). `file_pattern` never re-includes an ignored file.
//! - The skip set (`.git node_modules …`) is pruned unless a name appears as a path component of
//!   `directory` or `file_pattern`. Hidden files are searched.
//! - Binary files (a NUL byte) are skipped; other undecodable bytes are shown lossily.
//! - Output lines are `path:line:content` (the git grep / rg layout), in path order, at most 100.

use std::io;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use serde_json::{Map, Value};

use super::{arg_bool, arg_str, required_str, tool_metadata, Tool, ToolContext, ToolError};
use crate::permissions::listed_paths::Listed;

pub(crate) const MAX_MATCHES: usize = 100;
/// The searcher's buffer holds at least one whole line: a file with a longer line is skipped
/// (as an unreadable one is), so a repository file of one enormous line cannot make the
/// search hold it all.
pub(crate) const MAX_LINE_BYTES: usize = 8 << 20;

pub(crate) const DEFAULT_SKIP_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    "dist",
    "build",
    "target",
    ".next",
    ".nuxt",
    ".cache",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
];

pub(crate) struct SearchFileContent;

impl Tool for SearchFileContent {
    tool_metadata! {
        name: "search_file_content",
        read_only: true,
        description: "Search files for text or for a regular expression. By default, the search is \
         case-sensitive and treats the pattern as plain text. The tool shows a maximum of 100 \
         matching lines and the number of the other matches. By default, the tool skips large \
         directories: .git, node_modules, .venv, dist, build, __pycache__, and language caches. \
         To search one of these directories, name it in `directory` or `file_pattern`. In a git \
         repository, the tool also skips the files that .gitignore ignores, even when \
         `file_pattern` names them. If .gitignore ignores `directory` itself, the tool searches \
         every file in it. To search an ignored directory, set `directory` to it. The tool never \
         searches an ignored file in a directory that .gitignore does not ignore, for example a \
         file that a `*.log` rule ignores. Regular expressions use Rust regex syntax.",
        parameters: {"type": "object", "properties": {
            "pattern": {"type": "string", "description": "Text or regex pattern to search for"},
            "file_pattern": {"type": "string", "description": "File glob pattern to search in (e.g., '*.py', '**/*.txt')", "default": "**/*"},
            "directory": {"type": "string", "description": "Directory to search. Default: the working directory.", "default": "."},
            "case_sensitive": {"type": "boolean", "description": "If true, match upper and lower case exactly. Default true.", "default": true},
            "regex": {"type": "boolean", "description": "If true, treat pattern as a regular expression. Default false: plain text.", "default": false}},
            "required": ["pattern"]},
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let pattern = required_str(args, "pattern", "search_file_content")?;
        let file_pattern = arg_str(args, "file_pattern")?.unwrap_or("**/*");
        let directory = arg_str(args, "directory")?.unwrap_or(".");
        let case_sensitive = arg_bool(args, "case_sensitive")?.unwrap_or(true);
        let regex = arg_bool(args, "regex")?.unwrap_or(false);
        if directory.contains('\0') {
            return Ok("Error searching files: embedded null byte".to_owned());
        }
        let path = match ctx.resolve_read(directory) {
            Ok(p) => crate::permissions::path_policy::resolve(&p),
            Err(msg) => return Ok(msg),
        };
        let fs = ctx.services.fs();
        if !fs.exists(&path) {
            return Ok(format!("Error: Directory {directory} does not exist"));
        }
        let matcher = match RegexMatcherBuilder::new()
            .case_insensitive(!case_sensitive)
            .fixed_strings(!regex)
            .line_terminator(Some(b'\n'))
            .build(pattern)
        {
            Ok(m) => m,
            Err(e) => return Ok(format!("Error: Invalid regex pattern: {e}")),
        };
        let skip = effective_skip_dirs(file_pattern, directory);
        let filter = match FilePattern::new(file_pattern) {
            Ok(f) => f,
            Err(e) => return Ok(format!("Error searching files: {e}")),
        };
        let mut walk = Walk {
            ctx,
            dir: &path,
            matcher: &matcher,
            skip: &skip,
            filter: &filter,
            searcher: SearcherBuilder::new()
                .line_number(true)
                .binary_detection(BinaryDetection::quit(0))
                .heap_limit(Some(MAX_LINE_BYTES))
                .build(),
            collector: Collector::default(),
        };
        let result = if fs.is_local() {
            walk.local()
        } else {
            walk.via_fs()
        };
        if let Err(e) = result {
            return Ok(format!("Error searching files: {e}"));
        }
        Ok(walk.collector.render(pattern))
    }
}

/// The skip set minus every name the caller referenced in `directory` or `file_pattern`.
pub(crate) fn effective_skip_dirs(file_pattern: &str, directory: &str) -> Vec<&'static str> {
    let referenced: Vec<String> = [file_pattern, directory]
        .iter()
        .flat_map(|raw| {
            raw.replace('\\', "/")
                .split('/')
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    DEFAULT_SKIP_DIRS
        .iter()
        .copied()
        .filter(|d| !referenced.iter().any(|r| r == d))
        .collect()
}

/// `file_pattern` with gitignore-style anchoring: a pattern without `/` matches the file name at
/// any depth; one with `/` matches the path relative to the searched directory.
struct FilePattern {
    matcher: Option<GlobMatcher>,
    basename_only: bool,
}

impl FilePattern {
    fn new(raw: &str) -> Result<Self, String> {
        if raw.is_empty() || raw == "**/*" || raw == "**" || raw == "*" {
            return Ok(FilePattern {
                matcher: None,
                basename_only: false,
            });
        }
        let trimmed = raw.trim_start_matches("./");
        let basename_only = !trimmed.contains('/');
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(FilePattern {
            matcher: Some(glob.compile_matcher()),
            basename_only,
        })
    }

    fn accepts(&self, rel: &Path) -> bool {
        match &self.matcher {
            None => true,
            Some(m) if self.basename_only => rel.file_name().is_some_and(|n| m.is_match(n)),
            Some(m) => m.is_match(rel),
        }
    }
}

#[derive(Default)]
struct Collector {
    lines: Vec<String>,
    total: usize,
}

impl Collector {
    fn add_file(&mut self, rel: &str, found: Vec<(u64, String)>) {
        for (n, text) in found {
            self.total += 1;
            if self.lines.len() < MAX_MATCHES {
                self.lines.push(format!("{rel}:{n}:{text}"));
            }
        }
    }

    fn render(&self, pattern: &str) -> String {
        if self.total == 0 {
            return format!("No matches found for pattern: {pattern}");
        }
        let mut out = format!(
            "Found {} match(es):\n\n{}",
            self.total,
            self.lines.join("\n")
        );
        if self.total > MAX_MATCHES {
            out.push_str(&format!(
                "\n\n... and {} more matches",
                self.total - MAX_MATCHES
            ));
        }
        out
    }
}

/// Collects one file's matching lines; a file found to be binary is dropped whole.
struct FileSink {
    found: Vec<(u64, String)>,
    binary: bool,
    /// Once the overall cap is reached only counts are needed.
    keep_text: bool,
}

impl Sink for FileSink {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let first = mat.line_number().unwrap_or(0);
        for (i, line) in mat.lines().enumerate() {
            let text = if self.keep_text {
                let line = line.strip_suffix(b"\n").unwrap_or(line);
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                String::from_utf8_lossy(line).into_owned()
            } else {
                String::new()
            };
            self.found.push((first + i as u64, text));
        }
        Ok(true)
    }

    fn binary_data(
        &mut self,
        _searcher: &Searcher,
        _binary_byte_offset: u64,
    ) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// One search of a directory tree: what it looks for and what it has found.
struct Walk<'a> {
    ctx: &'a ToolContext<'a>,
    dir: &'a Path,
    matcher: &'a RegexMatcher,
    skip: &'a [&'static str],
    filter: &'a FilePattern,
    searcher: Searcher,
    collector: Collector,
}

impl Walk<'_> {
    /// Searches one file, read by `run`, into the collector.
    fn file(
        &mut self,
        rel: &str,
        run: impl FnOnce(&mut Searcher, &RegexMatcher, &mut FileSink) -> Result<(), io::Error>,
    ) {
        let mut sink = FileSink {
            found: Vec::new(),
            binary: false,
            keep_text: self.collector.lines.len() < MAX_MATCHES,
        };
        // Unreadable files are skipped, as every reference engine does.
        if run(&mut self.searcher, self.matcher, &mut sink).is_ok() && !sink.binary {
            self.collector.add_file(rel, sink.found);
        }
    }

    /// Walks the local disk as ripgrep does (ignore files honoured).
    fn local(&mut self) -> Result<(), String> {
        let dir = self.dir;
        if !dir.is_dir() {
            return Ok(());
        }
        let vcs = !dir_is_git_ignored(dir);
        let skip_owned: Vec<String> = self.skip.iter().map(|s| (*s).to_owned()).collect();
        let walker = ignore::WalkBuilder::new(dir)
            .hidden(false)
            .parents(true)
            .ignore(true)
            .git_ignore(vcs)
            .git_exclude(vcs)
            .git_global(false)
            .require_git(true)
            .follow_links(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(move |e| {
                e.depth() == 0 || !skip_owned.iter().any(|s| e.file_name() == s.as_str())
            })
            .build();
        for entry in walker {
            if self.ctx.cancel.is_cancelled() {
                break;
            }
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.path();
            let rel_path = path.strip_prefix(dir).unwrap_or(path);
            if !self.filter.accepts(rel_path) {
                continue;
            }
            let rel = rel_string(dir, path);
            self.file(&rel, |s, m, sink| s.search_path(m, path, sink));
        }
        Ok(())
    }

    /// Walks a host file system through the tools' [`FileSystem`](crate::tools::FileSystem).
    fn via_fs(&mut self) -> Result<(), String> {
        let (ctx, dir) = (self.ctx, self.dir);
        let fs = ctx.services.fs();
        if !fs.is_dir(dir) {
            return Ok(());
        }
        let stop = || ctx.cancel.is_cancelled();
        let mut entries = fs.walk(dir, None, &stop).map_err(|e| e.to_string())?;
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        let mut listed = ctx.listed_paths();
        for entry in entries {
            let path = entry.path;
            if ctx.cancel.is_cancelled() {
                break;
            }
            if !entry.is_file || listed.check(&path) != Listed::Inside {
                continue;
            }
            let rel_path: PathBuf = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
            if rel_path
                .components()
                .any(|c| self.skip.iter().any(|s| c.as_os_str() == *s))
            {
                continue;
            }
            if !self.filter.accepts(&rel_path) {
                continue;
            }
            let Ok(bytes) = fs.read_bytes(&path) else {
                continue;
            };
            let rel = rel_path.to_string_lossy().into_owned();
            self.file(&rel, |s, m, sink| s.search_slice(m, &bytes, sink));
        }
        Ok(())
    }
}

fn rel_string(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Whether `.gitignore` files between the work tree's root and `dir` ignore `dir` itself.
fn dir_is_git_ignored(dir: &Path) -> bool {
    let Some(root) = dir.ancestors().find(|a| a.join(".git").exists()) else {
        return false;
    };
    if root == dir {
        return false;
    }
    let mut ignored = false;
    let mut chain: Vec<&Path> = dir
        .ancestors()
        .skip(1)
        .take_while(|a| a.starts_with(root))
        .collect();
    chain.reverse();
    for ancestor in chain {
        let file = ancestor.join(".gitignore");
        if !file.is_file() {
            continue;
        }
        let mut builder = ignore::gitignore::GitignoreBuilder::new(ancestor);
        if builder.add(&file).is_some() {
            continue;
        }
        let Ok(gi) = builder.build() else { continue };
        let m = gi.matched_path_or_any_parents(dir, true);
        if m.is_ignore() {
            ignored = true;
        } else if m.is_whitelist() {
            ignored = false;
        }
    }
    ignored
}
