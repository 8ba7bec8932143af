//! `web_fetch` (spec §1.10): GET a URL under the SSRF policy and return its text.
//!
//! Every hop (the first URL and each redirect, at most 20) goes through
//! [`url_policy`](crate::permissions::url_policy); a host name is resolved here and the request
//! is pinned to the checked addresses, so the address judged is the address connected to.
//! Redirects are followed only within the requested origin (or its http→https upgrade): the
//! permission engine judged the requested URL alone, so a redirect elsewhere is reported, not
//! chased, and fetching it is a new call the engine judges (a deviation from the reference, which
//! follows any redirect the URL policy accepts). A result moved by a redirect names its final URL.
//! Proxies are not used. The body is capped at 5 MiB; 30 s per phase, 60 s for the whole chase
//! (both configurable). The tool is synchronous: the fetch runs on a small current-thread
//! runtime of its own.
//!
//! HTML is reduced to text in time linear in its size: html5ever's tree building is quadratic in
//! the element nesting, so a page over 1 MiB or nested deeper than 256 (estimated in one pass)
//! gets a tag-stripping pass instead of the tree (a deviation from the reference, which always
//! parses). The reduction runs on a thread of its own, so a cancel ends the call without waiting.

use std::net::SocketAddr;
use std::time::Duration;

use ipnet::IpNet;
use reqwest::StatusCode;
use serde_json::{Map, Value};

use super::{arg_bool, required_str, tool_metadata, Tool, ToolContext, ToolError};
use crate::cancel::CancelToken;
use crate::permissions::url_policy::{self, Target};
use crate::pycompat::py_repr;

pub const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;
pub const MAX_TEXT_CHARS: usize = 10_000;
pub const USER_AGENT: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36";

const JS_MARKERS: &[&str] = &[
    "__NEXT_DATA__",
    "__nuxt__",
    "data-reactroot",
    "data-react-helmet",
    "ng-version",
    "__vue__",
    "data-server-rendered",
    "ember-application",
    "svelte-",
    "__remix_manifest",
];
const RAW_TEXT_TYPES: &[&str] = &[
    "application/json",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "application/x-ndjson",
    "application/yaml",
    "application/x-yaml",
    "application/toml",
];

/// `tools.settings.web_fetch`, validated.
#[derive(Debug, Clone)]
pub struct WebSettings {
    /// Non-public ranges the operator allows (`allow_private` plus
    /// `AGENTAO_WEB_FETCH_ALLOW_CIDRS`).
    pub allow: Vec<IpNet>,
    pub phase_timeout: Duration,
    pub total_timeout: Duration,
}

impl Default for WebSettings {
    fn default() -> Self {
        WebSettings {
            allow: Vec::new(),
            phase_timeout: Duration::from_secs(30),
            total_timeout: Duration::from_secs(60),
        }
    }
}

pub struct WebFetch {
    description: String,
}

impl WebFetch {
    pub fn new(settings: &WebSettings) -> Self {
        let mut description =
            "Fetch content from a URL via HTTP (GET) and extract readable text. No JS-rendering \
                               fallback is configured."
                .to_owned();
        if !settings.allow.is_empty() {
            let nets: Vec<String> = settings.allow.iter().map(|n| n.to_string()).collect();
            description.push_str(&format!(
                " SSRF allowlist active (tools.settings.web_fetch.allow_private): also permits otherwise-blocked \
                 non-public target(s) in {}.",
                nets.join(", ")
            ));
        }
        WebFetch { description }
    }
}

impl Tool for WebFetch {
    tool_metadata! {
        name: "web_fetch",
        read_only: true,
        parameters: {"type": "object", "properties": {
            "url": {"type": "string", "description": "URL to fetch"},
            "extract_text": {"type": "boolean", "description": "If true, return only the text content. Default true.", "default": true}},
            "required": ["url"]},
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn requires_confirmation(&self) -> bool {
        true
    }
    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let url = required_str(args, "url", "web_fetch")?;
        let extract_text = arg_bool(args, "extract_text")?.unwrap_or(true);
        let settings = &ctx.services.web;
        let run = || run_fetch(url, extract_text, settings, ctx.cancel);
        // Never block on a runtime worker: if one is current, hop to a plain thread.
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| {
                s.spawn(run)
                    .join()
                    .unwrap_or_else(|_| Ok("Error: fetch thread failed".to_owned()))
            })
        } else {
            run()
        }
    }
}

fn run_fetch(
    url: &str,
    extract_text: bool,
    settings: &WebSettings,
    cancel: &CancelToken,
) -> Result<String, ToolError> {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return Ok(format!("Error: {e}")),
    };
    Ok(rt.block_on(async {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => format!("[Operation Cancelled] {}", cancel.reason()),
            text = fetch_and_render(url, extract_text, settings) => text,
        }
    }))
}

enum FetchError {
    Blocked(String),
    TooLarge,
    Timeout,
    Http(String),
}

struct Fetched {
    status: StatusCode,
    content_type: Option<String>,
    body: Vec<u8>,
    /// Where the body came from, when a same-origin redirect moved it.
    final_url: Option<String>,
}

/// How a chase ends without an error.
enum Landing {
    Body(Fetched),
    /// A redirect to another origin: the permission engine judged only the requested URL, so the
    /// new one must come back as a call of its own.
    Elsewhere {
        status: StatusCode,
        to: String,
    },
}

async fn fetch_and_render(url: &str, extract_text: bool, settings: &WebSettings) -> String {
    let fetched =
        match tokio::time::timeout(settings.total_timeout, guarded_get(url, settings)).await {
            Ok(r) => r,
            Err(_) => Err(FetchError::Timeout),
        };
    let fetched = match fetched {
        Ok(Landing::Body(f)) => f,
        Ok(Landing::Elsewhere { status, to }) => {
            return format!(
            "URL: {url}\nStatus: {}\n\nThe server redirected to {to} (another origin); it was not \
                 followed. Call web_fetch with that URL to fetch it.",
            status.as_u16()
        )
        }
        Err(FetchError::Blocked(why)) => return format!("Error: blocked outbound request — {why}"),
        Err(FetchError::TooLarge) => {
            return format!("Error: {url} — response body exceeds the {MAX_BODY_BYTES} byte limit")
        }
        Err(FetchError::Timeout) => return format!("Error: Request timed out for {url}"),
        Err(FetchError::Http(e)) => return format!("Error fetching URL: {e}"),
    };
    let code = fetched.status.as_u16();
    let url = match &fetched.final_url {
        Some(f) => format!("{url}\nFinal URL: {f}"),
        None => url.to_owned(),
    };
    let text = String::from_utf8_lossy(&fetched.body).into_owned();
    if is_raw_text(fetched.content_type.as_deref()) {
        return format!(
            "URL: {url}\nStatus: {code}\n\n{}",
            truncate(&text, MAX_TEXT_CHARS)
        );
    }
    // On a thread of its own so a cancel never waits for it (the select in `run_fetch` drops this
    // future; the thread ends by itself, its work being bounded).
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("web_fetch-render".to_owned())
        .spawn(move || {
            let _ = tx.send(render_html(&text, extract_text));
        });
    if spawned.is_err() {
        return "Error: could not start text extraction".to_owned();
    }
    let Ok(rendered) = rx.await else {
        return "Error: text extraction failed".to_owned();
    };
    let js_note = if rendered.needs_js {
        "Note: page appears to require JS rendering; only the static shell was captured.\n"
    } else {
        ""
    };
    format!(
        "URL: {url}\nStatus: {code}\n{js_note}\n{}",
        truncate(&rendered.body, MAX_TEXT_CHARS)
    )
}

/// The HTML part of a result.
struct Rendered {
    needs_js: bool,
    body: String,
}

/// Above this size the tree is not built: html5ever's tree building has superlinear corners.
const MAX_TREE_HTML_BYTES: usize = 1024 * 1024;
/// Above this (approximate) element nesting the tree is not built: html5ever's tree building is
/// quadratic in the depth (`<div>`×40,000 took 56 s in a debug build).
const MAX_TREE_DEPTH: usize = 256;

/// Linear in the size of `html` whatever it holds: a page too large or nested too deep for the
/// tree gets the tag-stripping pass instead; ordinary pages get the tree.
fn render_html(html: &str, extract_text: bool) -> Rendered {
    if html.len() > MAX_TREE_HTML_BYTES || nests_deeper_than(html, MAX_TREE_DEPTH) {
        return render_stripped(html, extract_text);
    }
    let doc = scraper::Html::parse_document(html);
    let needs_js = needs_js_rendering(html, &doc);
    let body = if extract_text {
        extract(&doc)
    } else {
        html.to_owned()
    };
    Rendered { needs_js, body }
}

fn http_error(e: reqwest::Error) -> FetchError {
    if e.is_timeout() {
        FetchError::Timeout
    } else {
        FetchError::Http(e.to_string())
    }
}

/// Whether a redirect from `from` to `to` stays within what the permission engine approved: the
/// same scheme, host and port, or the upgrade of that host from http to https on the default port.
fn same_origin(from: &reqwest::Url, to: &reqwest::Url) -> bool {
    if from.host() != to.host() {
        return false;
    }
    let (from_port, to_port) = (from.port_or_known_default(), to.port_or_known_default());
    (from.scheme() == to.scheme() && from_port == to_port)
        || (from.scheme() == "http"
            && to.scheme() == "https"
            && from_port == Some(80)
            && to_port == Some(443))
}

/// The redirect chase with the policy on every hop; it stays within the first URL's origin.
async fn guarded_get(url: &str, settings: &WebSettings) -> Result<Landing, FetchError> {
    let mut current = url.to_owned();
    for _ in 0..=url_policy::MAX_REDIRECTS {
        let target =
            url_policy::check_shape(&current, &settings.allow).map_err(FetchError::Blocked)?;
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(settings.phase_timeout)
            .user_agent(USER_AGENT);
        let request_url = match target {
            Target::Literal(u) => u,
            Target::Name { url, host, port } => {
                let addrs = resolve(&host, port, &current).await?;
                let pinned = url_policy::check_resolved(&host, &addrs, &settings.allow)
                    .map_err(FetchError::Blocked)?;
                builder = builder.resolve_to_addrs(&host, &pinned);
                url
            }
        };
        let client = builder
            .build()
            .map_err(|e| FetchError::Http(e.to_string()))?;
        let send = client.get(request_url.clone()).send();
        let mut response = match tokio::time::timeout(settings.phase_timeout, send).await {
            Err(_) => return Err(FetchError::Timeout),
            Ok(r) => r.map_err(http_error)?,
        };
        let status = response.status();
        if matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
            if let Some(loc) = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
            {
                if !loc.is_empty() {
                    let next = match request_url.join(loc) {
                        Ok(u) => u,
                        // Unparsable: let the policy refuse it with its own words.
                        Err(_) => {
                            url_policy::check_shape(loc, &settings.allow)
                                .map_err(FetchError::Blocked)?;
                            return Err(FetchError::Blocked(format!(
                                "invalid redirect target: {}",
                                py_repr(loc)
                            )));
                        }
                    };
                    if !same_origin(&request_url, &next) {
                        // Judged by shape only: no lookup for a host that is not contacted.
                        url_policy::check_shape(next.as_str(), &settings.allow)
                            .map_err(FetchError::Blocked)?;
                        return Ok(Landing::Elsewhere {
                            status,
                            to: next.to_string(),
                        });
                    }
                    current = next.to_string();
                    continue;
                }
            }
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_BODY_BYTES as u64)
        {
            return Err(FetchError::TooLarge);
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        loop {
            let chunk = match tokio::time::timeout(settings.phase_timeout, response.chunk()).await {
                Err(_) => return Err(FetchError::Timeout),
                Ok(c) => c.map_err(http_error)?,
            };
            let Some(chunk) = chunk else { break };
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(FetchError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        if status.as_u16() >= 400 {
            let kind = if status.as_u16() < 500 {
                "Client error"
            } else {
                "Server error"
            };
            return Err(FetchError::Http(format!(
                "{kind} '{} {}' for url '{}'\nFor more information check: \
                 https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/{}",
                status.as_u16(),
                status.canonical_reason().unwrap_or(""),
                request_url,
                status.as_u16()
            )));
        }
        return Ok(Landing::Body(Fetched {
            status,
            content_type,
            body,
            final_url: (current != url).then_some(current),
        }));
    }
    Err(FetchError::Blocked(format!(
        "too many redirects ({}) for {}",
        url_policy::MAX_REDIRECTS,
        py_repr(url)
    )))
}

async fn resolve(host: &str, port: u16, url: &str) -> Result<Vec<SocketAddr>, FetchError> {
    let lookup = tokio::net::lookup_host((host.to_owned(), port));
    match tokio::time::timeout(url_policy::RESOLVE_TIMEOUT, lookup).await {
        Err(_) => Err(FetchError::Blocked(format!(
            "outbound policy check did not finish within {:?}s: {}",
            url_policy::RESOLVE_TIMEOUT.as_secs_f64(),
            py_repr(url)
        ))),
        Ok(Ok(addrs)) => Ok(addrs.collect()),
        // Fail closed: no usable address.
        Ok(Err(_)) => Ok(Vec::new()),
    }
}

fn is_raw_text(content_type: Option<&str>) -> bool {
    let Some(ct) = content_type else { return false };
    let media = ct.split(';').next().unwrap_or("").trim().to_lowercase();
    if media == "text/html" || media == "text/xml" {
        return false;
    }
    media.starts_with("text/")
        || RAW_TEXT_TYPES.contains(&media.as_str())
        || media.ends_with("+json")
}

fn truncate(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((i, _)) => format!("{}\n\n[Content truncated...]", &text[..i]),
        None => text.to_owned(),
    }
}

/// Every text node of the document (comments excluded), optionally skipping some elements.
fn text_nodes<'a>(doc: &'a scraper::Html, skip: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut stack = vec![doc.tree.root()];
    while let Some(node) = stack.pop() {
        match node.value() {
            scraper::Node::Text(t) => out.push(&**t),
            scraper::Node::Element(e) if skip.contains(&e.name()) => continue,
            _ => {}
        }
        let children: Vec<_> = node.children().collect();
        stack.extend(children.into_iter().rev());
    }
    out
}

fn needs_js_rendering(html: &str, doc: &scraper::Html) -> bool {
    js_shell(html, text_nodes(doc, &[]))
}

/// The JS-rendering heuristic over the page's text nodes.
fn js_shell<'a>(html: &str, text_nodes: impl IntoIterator<Item = &'a str>) -> bool {
    if JS_MARKERS.iter().any(|m| html.contains(m)) {
        return true;
    }
    // `get_text(separator=" ", strip=True)`.
    let text: Vec<&str> = text_nodes
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let text_len =
        text.iter().map(|s| s.chars().count()).sum::<usize>() + text.len().saturating_sub(1);
    let html_len = html.chars().count();
    (html_len > 0 && (text_len as f64) / (html_len as f64) < 0.05)
        || (text_len < 200 && html_len > 5000)
}

/// Drops script/style/nav/footer, trims lines, splits on double spaces, drops empties.
fn extract(doc: &scraper::Html) -> String {
    chunk_lines(&text_nodes(doc, &["script", "style", "nav", "footer"]).concat())
}

/// Trims lines, splits on double spaces, drops empties, joins with newlines.
fn chunk_lines(text: &str) -> String {
    let mut chunks = Vec::new();
    for line in crate::pycompat::splitlines(text, false) {
        for phrase in line.trim().split("  ") {
            let phrase = phrase.trim();
            if !phrase.is_empty() {
                chunks.push(phrase);
            }
        }
    }
    chunks.join("\n")
}

/// Elements dropped by `extract`.
const DROPPED: &[&str] = &["script", "style", "nav", "footer"];
/// Elements whose content is text up to their end tag (no tags inside).
const RAW_TEXT: &[&str] = &[
    "script", "style", "title", "textarea", "xmp", "iframe", "noembed", "noframes",
];
/// Elements that never nest by themselves: void elements, and those whose end tag is optional
/// (the next `<p>` or `<li>` closes an open one; counting them would misjudge ordinary pages).
const NON_NESTING: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr", "keygen", "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th",
    "thead", "tbody", "tfoot", "colgroup", "rb", "rt", "rtc", "rp", "html", "head", "body",
];
/// HTML start tags that end SVG/MathML content, after which `<x/>` opens an element again.
const FOREIGN_BREAKOUT: &[&str] = &[
    "b",
    "big",
    "blockquote",
    "body",
    "br",
    "center",
    "code",
    "dd",
    "div",
    "dl",
    "dt",
    "em",
    "embed",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "head",
    "hr",
    "i",
    "img",
    "li",
    "listing",
    "menu",
    "meta",
    "nobr",
    "ol",
    "p",
    "pre",
    "ruby",
    "s",
    "small",
    "span",
    "strong",
    "strike",
    "sub",
    "sup",
    "table",
    "tt",
    "u",
    "ul",
    "var",
    "font",
];

fn named(list: &[&str], name: &str) -> bool {
    list.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// One lexical piece of an HTML document, as `scan` sees it.
enum Piece<'a> {
    Text(&'a str),
    Open { name: &'a str, self_closing: bool },
    Close(&'a str),
}

/// An approximate HTML lexer in one linear pass: tags, end tags and text; comments, doctypes
/// and processing instructions are skipped; raw-text elements' content is one text piece.
/// `on` returns false to stop early.
fn scan<'a>(html: &'a str, mut on: impl FnMut(Piece<'a>) -> bool) {
    let b = html.as_bytes();
    let mut i = 0;
    let mut text_start = 0;
    while let Some(off) = html[i..].find('<') {
        let lt = i + off;
        let rest = &b[lt + 1..];
        let closing = rest.first() == Some(&b'/');
        let name_start = lt + 1 + usize::from(closing);
        let is_tag = b.get(name_start).is_some_and(u8::is_ascii_alphabetic);
        let is_markup = !closing && matches!(rest.first(), Some(b'!' | b'?'));
        if !is_tag && !is_markup {
            // A lone `<` is text.
            i = lt + 1;
            continue;
        }
        if text_start < lt && !on(Piece::Text(&html[text_start..lt])) {
            return;
        }
        if is_markup {
            i = if rest.starts_with(b"!--") {
                html[lt + 4..]
                    .find("-->")
                    .map_or(b.len(), |e| lt + 4 + e + 3)
            } else {
                html[lt..].find('>').map_or(b.len(), |e| lt + e + 1)
            };
            text_start = i;
            continue;
        }
        let name_len = b[name_start..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b':' | b'_'))
            .count();
        let name = &html[name_start..name_start + name_len];
        let (tag_end, self_closing) = end_of_tag(b, name_start + name_len);
        i = tag_end;
        text_start = i;
        if closing {
            if !on(Piece::Close(name)) {
                return;
            }
            continue;
        }
        if !on(Piece::Open { name, self_closing }) {
            return;
        }
        if !self_closing && named(RAW_TEXT, name) {
            let end = find_end_tag(html, i, name);
            if i < end && !on(Piece::Text(&html[i..end])) {
                return;
            }
            i = end;
            text_start = end;
        }
    }
    if text_start < b.len() {
        on(Piece::Text(&html[text_start..]));
    }
}

/// The index after the `>` that ends a tag whose attributes start at `from` (quoted attribute
/// values may hold `>`), and whether the tag ends with `/>`.
fn end_of_tag(b: &[u8], from: usize) -> (usize, bool) {
    let mut j = from;
    let mut last = 0u8;
    while j < b.len() {
        match b[j] {
            b'>' => return (j + 1, last == b'/'),
            q @ (b'"' | b'\'') if last == b'=' => {
                j = b[j + 1..]
                    .iter()
                    .position(|&c| c == q)
                    .map_or(b.len(), |p| j + 1 + p);
            }
            c if c.is_ascii_whitespace() => {}
            c => last = c,
        }
        j += 1;
    }
    (b.len(), false)
}

/// Where `</name` starts (any case) at or after `from`, or the end of the document.
fn find_end_tag(html: &str, from: usize, name: &str) -> usize {
    let b = html.as_bytes();
    let mut j = from;
    while let Some(off) = html[j..].find("</") {
        let k = j + off;
        let after = &b[k + 2..];
        if after.len() >= name.len() && after[..name.len()].eq_ignore_ascii_case(name.as_bytes()) {
            return k;
        }
        j = k + 2;
    }
    b.len()
}

/// Whether the element nesting goes beyond `limit`: open tags minus end tags, leaving out
/// elements that do not nest and self-closed SVG/MathML elements.
fn nests_deeper_than(html: &str, limit: usize) -> bool {
    let mut depth = 0usize;
    let mut foreign = 0usize;
    let mut deeper = false;
    scan(html, |piece| {
        match piece {
            Piece::Open { name, self_closing } => {
                if foreign > 0 && named(FOREIGN_BREAKOUT, name) {
                    foreign = 0;
                }
                let is_foreign_root = named(&["svg", "math"], name);
                if self_closing && (foreign > 0 || is_foreign_root) {
                    return true;
                }
                if is_foreign_root {
                    foreign += 1;
                }
                if !named(NON_NESTING, name) {
                    depth += 1;
                    if depth > limit {
                        deeper = true;
                        return false;
                    }
                }
            }
            Piece::Close(name) => {
                if named(&["svg", "math"], name) {
                    foreign = foreign.saturating_sub(1);
                }
                if !named(NON_NESTING, name) {
                    depth = depth.saturating_sub(1);
                }
            }
            Piece::Text(_) => {}
        }
        true
    });
    deeper
}

/// `render_html` without a tree: the text between tags, entities decoded.
fn render_stripped(html: &str, extract_text: bool) -> Rendered {
    let mut all = Vec::new();
    let mut kept = String::new();
    let mut dropped = 0usize;
    scan(html, |piece| {
        match piece {
            Piece::Text(t) => {
                let text = decode_entities(t);
                if dropped == 0 {
                    kept.push_str(&text);
                }
                all.push(text);
            }
            Piece::Open { name, .. } if named(DROPPED, name) => dropped += 1,
            Piece::Close(name) if named(DROPPED, name) => dropped = dropped.saturating_sub(1),
            _ => {}
        }
        true
    });
    let needs_js = js_shell(html, all.iter().map(String::as_str));
    let body = if extract_text {
        chunk_lines(&kept)
    } else {
        html.to_owned()
    };
    Rendered { needs_js, body }
}

/// The common character references; others stay as written.
fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest[1..]
            .char_indices()
            .take(12)
            .find(|&(_, c)| c == ';')
            .and_then(|(semi, _)| Some((reference(&rest[1..1 + semi])?, semi + 2)));
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn reference(name: &str) -> Option<char> {
    let code = if let Some(num) = name.strip_prefix('#') {
        match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        }
    } else {
        return match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some('\u{a0}'),
            _ => None,
        };
    };
    Some(
        char::from_u32(code)
            .filter(|&c| c != '\0')
            .unwrap_or('\u{fffd}'),
    )
}

#[cfg(test)]
mod tests;
