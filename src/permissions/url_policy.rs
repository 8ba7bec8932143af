//! URL / SSRF policy for web_fetch (spec §3.9). Lands with the tool catalogue.
