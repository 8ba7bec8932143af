//! Unit tests of `web_fetch`: text extraction, the HTML reduction in bounded time, redirects.

use super::*;

#[test]
fn extraction_rules() {
    let doc = scraper::Html::parse_document(
        "<html><head><title>T</title><style>x{}</style></head><body><nav>menu</nav>\
         <h1>Hello</h1>\n<p>  one  two </p><script>var a;</script><!-- c --><footer>f</footer></body></html>",
    );
    assert_eq!(extract(&doc), "THello\none\ntwo");
    assert!(is_raw_text(Some("application/json; charset=utf-8")));
    assert!(is_raw_text(Some("text/plain")));
    assert!(!is_raw_text(Some("text/html")));
    assert!(is_raw_text(Some("application/vnd.api+json")));
    assert!(!is_raw_text(None));
    assert_eq!(truncate("abcdef", 3), "abc\n\n[Content truncated...]");
}

/// Audit of 2026-12-05: `<div>`×N is quadratic in html5ever's tree building (n=40,000 took
/// 56 s in a debug build; the old code would take hours here).
#[test]
fn deep_nesting_is_rendered_in_bounded_time() {
    let n = 500_000;
    let html = format!("{}x{}", "<div>".repeat(n), "</div>".repeat(n));
    let (tx, rx) = std::sync::mpsc::channel();
    let start = std::time::Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(render_html(&html, true));
    });
    let rendered = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("a 500,000-deep document is rendered within 30 s");
    println!(
        "FIGURE web_fetch render of {n}-deep <div> nesting ({} bytes): {:?}",
        11 * n + 1,
        start.elapsed()
    );
    assert_eq!(rendered.body, "x");
    assert!(rendered.needs_js);
    // Under the size bound, the nesting bound is what keeps the tree away (440 KB).
    let n = 40_000;
    let html = format!("{}x{}", "<div>".repeat(n), "</div>".repeat(n));
    assert!(html.len() < MAX_TREE_HTML_BYTES && nests_deeper_than(&html, MAX_TREE_DEPTH));
    let start = std::time::Instant::now();
    assert_eq!(render_html(&html, true).body, "x");
    println!(
        "FIGURE web_fetch render of {n}-deep <div> nesting ({} bytes): {:?}",
        html.len(),
        start.elapsed()
    );
}

#[test]
fn the_nesting_estimate_spares_ordinary_pages() {
    let flat = "<ul>".to_owned() + &"<li>item<p>para".repeat(1000) + "</ul><br><img src=x>";
    assert!(!nests_deeper_than(&flat, 256));
    let icons = "<svg><path d='M0 0'/><g/></svg>".repeat(500);
    assert!(!nests_deeper_than(&icons, 256));
    let quoted = "<a title='<div><div>'>x</a>".repeat(500);
    assert!(!nests_deeper_than(&quoted, 256));
    let script = format!("<script>{}</script>", "<div>".repeat(500));
    assert!(!nests_deeper_than(&script, 256));
    // `<div/>` opens a div in HTML, and in SVG once an HTML tag broke out of it.
    assert!(nests_deeper_than(&"<div/>".repeat(300), 256));
    assert!(nests_deeper_than(
        &format!("<svg>{}", "<div/>".repeat(300)),
        256
    ));
    assert!(nests_deeper_than(&"<span>".repeat(300), 256));
}

#[test]
fn the_stripping_pass_extracts_like_the_tree() {
    for html in [
        "<html><head><title>T</title><style>x{}</style></head><body><nav>menu</nav>\
         <h1>Hello</h1>\n<p>  one  two </p><script>var a;</script><!-- c --><footer>f</footer></body></html>",
        "<!DOCTYPE html><p>a &amp; b &lt;c&gt; &#65;&#x42; &bogus; & x<y</p><SCRIPT>if (a</b) {}</SCRIPT>tail",
        "<div title=\"a>b\">in</div><textarea><b>raw</b></textarea>",
    ] {
        let tree = scraper::Html::parse_document(html);
        assert_eq!(render_stripped(html, true).body, extract(&tree), "{html}");
    }
    assert_eq!(
        decode_entities("&#0;&#x110000;&nbsp;"),
        "\u{fffd}\u{fffd}\u{a0}"
    );
}

#[test]
fn redirects_stay_within_the_origin() {
    let u = |s: &str| reqwest::Url::parse(s).unwrap();
    let from = u("http://example.com/a");
    assert!(same_origin(&from, &u("http://example.com:80/b?c")));
    assert!(same_origin(&from, &u("https://example.com/b")));
    assert!(!same_origin(&from, &u("https://example.com:8443/b")));
    assert!(!same_origin(&from, &u("http://example.com:8080/b")));
    assert!(!same_origin(&from, &u("http://other.example.com/b")));
    assert!(!same_origin(
        &u("https://example.com/"),
        &u("http://example.com/")
    ));
    assert!(!same_origin(
        &u("http://example.com:8080/"),
        &u("https://example.com/")
    ));
}
