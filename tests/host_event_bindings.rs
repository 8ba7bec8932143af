//! The bindings' host-event types (Go, Swift, C++), and Go's and Swift's decoders of them, are generated
//! from the v3 JSON Schema in `docs/schema/host.events.v3.schema.json`, and the committed files
//! are exactly what the generator writes now.
//! `AGENTAO_UPDATE_BINDINGS=1 cargo test --test host_event_bindings` rewrites them (commit the
//! result); without it the test fails when one is stale.
//!
//! What the schema cannot say lives in the small tables below (a field whose binding type is
//! one the binding already has, such as Go's `PermissionMode`).

use serde_json::Value;

const SCHEMA: &str = "docs/schema/host.events.v3.schema.json";
const GO: &str = "bindings/go/agentao/host_events_gen.go";
const GO_DECODE: &str = "bindings/go/agentao/host_events_decode_gen.go";
const SWIFT: &str = "bindings/swift/Sources/Agentao/HostEvents.swift";
const SWIFT_DECODE: &str = "bindings/swift/Sources/Agentao/HostEventsDecode.swift";
const CPP: &str = "bindings/cpp/agentao_events.hpp";

/// Go types the bindings already name: (definition, field, type).
const GO_TYPES: &[(&str, &str, &str)] = &[("PermissionDecisionEvent", "mode", "PermissionMode")];
/// Swift names kept for a referenced definition: (definition, alias, referenced definition).
const SWIFT_ALIASES: &[(&str, &str, &str)] =
    &[("SubagentLifecycleEvent", "Usage", "SubagentUsage")];

#[derive(Debug, Clone, PartialEq)]
enum Ty {
    Str,
    /// An RFC 3339 UTC timestamp (a string).
    Time,
    Int,
    StrList,
    /// A free JSON object.
    Object,
    Ref(String),
}

#[derive(Debug)]
struct Field {
    name: String,
    ty: Ty,
    nullable: bool,
    required: bool,
    values: Vec<String>,
}

#[derive(Debug)]
struct Def {
    name: String,
    /// The discriminator's value, for an event.
    event_type: Option<String>,
    doc: String,
    fields: Vec<Field>,
}

fn schema() -> Value {
    let text = std::fs::read_to_string(path(SCHEMA)).expect("the v3 schema");
    serde_json::from_str(&text).expect("the v3 schema is JSON")
}

fn path(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn field_ty(name: &str, p: &Value) -> (Ty, Vec<String>) {
    if let Some(r) = p.get("$ref").and_then(Value::as_str) {
        return (Ty::Ref(r.rsplit('/').next().unwrap().to_owned()), vec![]);
    }
    let values: Vec<String> = p
        .get("enum")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    let ty = match p.get("type").and_then(Value::as_str) {
        Some("string") if name.ends_with("_at") && p.get("pattern").is_some() => Ty::Time,
        Some("string") => Ty::Str,
        Some("integer") => Ty::Int,
        Some("array") => {
            assert_eq!(p["items"]["type"], "string", "{name}: only string lists");
            Ty::StrList
        }
        Some("object") => Ty::Object,
        other => panic!("{name}: type {other:?} has no binding type"),
    };
    (ty, values)
}

/// The definitions the events use, events first, in the schema's `oneOf` order.
fn defs(schema: &Value) -> Vec<Def> {
    let all = schema["$defs"].as_object().expect("$defs");
    let mapping = schema["discriminator"]["mapping"].as_object().unwrap();
    let key = schema["discriminator"]["propertyName"].as_str().unwrap();
    let mut names: Vec<String> = schema["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["$ref"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < names.len() {
        let name = names[i].clone();
        i += 1;
        let d = &all[&name];
        let required: Vec<&str> = d["required"]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap()).collect())
            .unwrap_or_default();
        let event_type = mapping
            .iter()
            .find(|(_, r)| r.as_str().unwrap().ends_with(&format!("/{name}")))
            .map(|(t, _)| t.clone());
        let props = d["properties"].as_object().unwrap();
        // Required fields in the schema's order of `required`, then the others.
        let mut order: Vec<&str> = required.clone();
        order.extend(
            props
                .keys()
                .map(String::as_str)
                .filter(|k| !required.contains(k)),
        );
        let mut fields = Vec::new();
        for fname in order {
            if fname == key {
                continue;
            }
            let p = &props[fname];
            let (p, nullable) = match p.get("anyOf").and_then(Value::as_array) {
                Some(alts) => {
                    let non_null: Vec<&Value> =
                        alts.iter().filter(|a| a["type"] != "null").collect();
                    assert_eq!(non_null.len(), 1, "{name}.{fname}: one type or null");
                    (non_null[0], alts.len() > 1)
                }
                None => (p, false),
            };
            let (ty, values) = field_ty(fname, p);
            if let Ty::Ref(r) = &ty {
                if !names.contains(r) {
                    names.push(r.clone());
                }
            }
            fields.push(Field {
                name: fname.to_owned(),
                ty,
                nullable,
                required: required.contains(&fname),
                values,
            });
        }
        out.push(Def {
            name,
            event_type,
            doc: d["description"].as_str().unwrap_or("").to_owned(),
            fields,
        });
    }
    out
}

/// The description's first paragraph, one line, with the reference's double backquotes single.
fn summary(doc: &str) -> String {
    let first = doc.split("\n\n").next().unwrap_or("");
    first
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("``", "`")
}

fn camel(snake: &str, upper_first: bool, initialisms: bool) -> String {
    let mut out = String::new();
    for (i, part) in snake.split('_').enumerate() {
        if initialisms && part == "id" {
            out.push_str("ID");
            continue;
        }
        let mut cs = part.chars();
        if let Some(c) = cs.next() {
            if i == 0 && !upper_first {
                out.push(c);
            } else {
                out.extend(c.to_uppercase());
            }
            out.push_str(cs.as_str());
        }
    }
    out
}

const HEADER: &str = "Code generated by tests/host_event_bindings.rs from docs/schema/host.events.v3.schema.json; DO NOT EDIT.";

/// Go: the structs, their `EventType`, and `newHostEvent` for the decoder (events.go).
fn go(defs: &[Def]) -> String {
    let mut o = format!("// {HEADER}\n// Regenerate: AGENTAO_UPDATE_BINDINGS=1 cargo test --test host_event_bindings\n\npackage agentao\n\nimport (\n\t\"encoding/json\"\n\t\"time\"\n)\n");
    for d in defs {
        o.push_str(&format!("\n// {}: {}\n", d.name, summary(&d.doc)));
        o.push_str(&format!("type {} struct {{\n", d.name));
        let rows: Vec<(String, String, String, String)> = d
            .fields
            .iter()
            .map(|f| {
                let base = match &f.ty {
                    _ if GO_TYPES
                        .iter()
                        .any(|(n, k, _)| *n == d.name && *k == f.name) =>
                    {
                        GO_TYPES
                            .iter()
                            .find(|(n, k, _)| *n == d.name && *k == f.name)
                            .unwrap()
                            .2
                            .to_owned()
                    }
                    Ty::Str => "string".into(),
                    Ty::Time => "time.Time".into(),
                    Ty::Int => "int64".into(),
                    Ty::StrList => "[]string".into(),
                    Ty::Object => "json.RawMessage".into(),
                    Ty::Ref(r) => r.clone(),
                };
                let pointer = f.nullable && !matches!(f.ty, Ty::StrList | Ty::Object);
                let ty = if pointer { format!("*{base}") } else { base };
                let comment = match (&f.ty, f.values.is_empty()) {
                    (Ty::Object, _) => " // an object, or null".to_owned(),
                    (_, false) => format!(" // {}", f.values.join(" | ")),
                    _ => String::new(),
                };
                (
                    camel(&f.name, true, true),
                    ty,
                    format!("`json:\"{}\"`", f.name),
                    comment,
                )
            })
            .collect();
        // gofmt's alignment: each column as wide as its widest cell in a run of lines that
        // have the column, plus one space (the tags are a column only before a comment).
        let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        for (i, (name, ty, tag, comment)) in rows.iter().enumerate() {
            let tag = if comment.is_empty() {
                tag.clone()
            } else {
                let run = |r: &&(String, String, String, String)| !r.3.is_empty();
                let before = rows[..i].iter().rev().take_while(run);
                let after = rows[i..].iter().take_while(run);
                let w2 = before.chain(after).map(|r| r.2.len()).max().unwrap_or(0);
                format!("{tag:w2$}")
            };
            o.push_str(&format!("\t{name:w0$} {ty:w1$} {tag}{comment}\n"));
        }
        o.push_str("}\n");
        if let Some(t) = &d.event_type {
            o.push_str(&format!(
                "\n// EventType is \"{t}\".\nfunc (*{}) EventType() string {{ return \"{t}\" }}\n",
                d.name
            ));
        }
    }
    o.push_str("\n// newHostEvent is the typed event of an event_type, or nil for one this binding does not know.\nfunc newHostEvent(eventType string) HostEvent {\n\tswitch eventType {\n");
    for d in defs {
        if let Some(t) = &d.event_type {
            o.push_str(&format!("\tcase \"{t}\":\n\t\treturn &{}{{}}\n", d.name));
        }
    }
    o.push_str("\t}\n\treturn nil\n}\n");
    o
}

/// Go: each struct's `decodeFrom`, which reads its JSON object through the readers of
/// `host_event_decoder.go` without reflection (encoding/json is the fallback, events.go).
fn go_decode(defs: &[Def]) -> String {
    let mut o = format!("// {HEADER}\n// Regenerate: AGENTAO_UPDATE_BINDINGS=1 cargo test --test host_event_bindings\n\npackage agentao\n");
    for d in defs {
        let keys_var = format!("{}Keys", camel(&camel_to_snake(&d.name), false, false));
        let keys: Vec<String> = d.fields.iter().map(|f| format!("\"{}\"", f.name)).collect();
        o.push_str(&format!(
            "\n// {keys_var} are {}'s keys (for encoding/json's case-insensitive match).\nvar {keys_var} = []string{{{}}}\n",
            d.name,
            keys.join(", ")
        ));
        o.push_str(&format!(
            "\n// decodeFrom reads a {} object (see eventDecoder).\nfunc (e *{}) decodeFrom(d *eventDecoder) {{\n\tif !d.object() {{\n\t\treturn\n\t}}\n\tfor d.member() {{\n\t\tswitch string(d.key) {{\n",
            d.name, d.name
        ));
        if d.event_type.is_some() {
            o.push_str("\t\tcase \"event_type\":\n\t\t\td.skip()\n");
        }
        for f in &d.fields {
            let field = format!("e.{}", camel(&f.name, true, true));
            let typed = GO_TYPES
                .iter()
                .any(|(n, k, _)| *n == d.name && *k == f.name);
            assert!(
                !typed || (f.ty == Ty::Str && !f.nullable),
                "{}.{}: a named Go type is read as a plain string",
                d.name,
                f.name
            );
            let read = match (&f.ty, f.nullable) {
                (Ty::Str, false) if typed => format!("d.str((*string)(&{field}))"),
                (Ty::Str, false) => format!("d.str(&{field})"),
                (Ty::Str, true) => format!("d.optStr(&{field})"),
                (Ty::Time, false) => format!("d.time(&{field})"),
                (Ty::Time, true) => format!("d.optTime(&{field})"),
                (Ty::Int, false) => format!("d.int(&{field})"),
                (Ty::Int, true) => format!("d.optInt(&{field})"),
                (Ty::StrList, _) => format!("d.strList(&{field})"),
                (Ty::Object, _) => format!("d.raw(&{field})"),
                // As encoding/json: a null clears a pointer, a repeated key fills the same struct.
                (Ty::Ref(r), true) => format!(
                    "if d.null() {{\n\t\t\t\t{field} = nil\n\t\t\t}} else {{\n\t\t\t\tif {field} == nil {{\n\t\t\t\t\t{field} = new({r})\n\t\t\t\t}}\n\t\t\t\t{field}.decodeFrom(d)\n\t\t\t}}"
                ),
                (Ty::Ref(_), false) => {
                    format!("if !d.null() {{\n\t\t\t\t{field}.decodeFrom(d)\n\t\t\t}}")
                }
            };
            o.push_str(&format!("\t\tcase \"{}\":\n\t\t\t{read}\n", f.name));
        }
        o.push_str(&format!(
            "\t\tdefault:\n\t\t\td.unknownKey({keys_var})\n\t\t}}\n\t}}\n}}\n"
        ));
    }
    o
}

/// CamelCase to snake_case.
fn camel_to_snake(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            s.push('_');
        }
        s.extend(c.to_lowercase());
    }
    s
}

/// Swift: the `HostEvent` enum and its structs (decoded with `.convertFromSnakeCase`; the
/// decoding entry point is `HostEventDecoding.swift`).
fn swift(defs: &[Def]) -> String {
    let mut o = format!("// {HEADER}\n// Regenerate: AGENTAO_UPDATE_BINDINGS=1 cargo test --test host_event_bindings\n\nimport Foundation\n\n");
    o.push_str("/// A host event (the reference's v3 wire form, docs/schema/host.events.v3.schema.json). Host\n/// events never carry prompt text, arguments or tool output.\npublic enum HostEvent: Decodable, Sendable, Equatable {\n");
    let events: Vec<&Def> = defs.iter().filter(|d| d.event_type.is_some()).collect();
    for d in &events {
        let t = d.event_type.as_ref().unwrap();
        o.push_str(&format!(
            "    case {}({})\n",
            camel(t, false, false),
            d.name
        ));
    }
    o.push_str("    /// An event this binding does not know (a newer type) or could not decode, as raw JSON.\n    case unknown(eventType: String, json: String)\n\n");
    o.push_str("    // Decoded with `.convertFromSnakeCase`, as every event struct here.\n    struct Header: Decodable { let eventType: String }\n\n");
    o.push_str("    public init(from decoder: any Decoder) throws {\n        switch try Header(from: decoder).eventType {\n");
    for d in &events {
        let t = d.event_type.as_ref().unwrap();
        o.push_str(&format!(
            "        case \"{t}\": self = .{}(try {}(from: decoder))\n",
            camel(t, false, false),
            d.name
        ));
    }
    o.push_str("        case let other: self = .unknown(eventType: other, json: \"\")\n        }\n    }\n}\n");
    for d in defs {
        o.push_str(&format!(
            "\n/// {}\npublic struct {}: Decodable, Sendable, Equatable {{\n",
            summary(&d.doc),
            d.name
        ));
        for (owner, alias, target) in SWIFT_ALIASES {
            if *owner == d.name {
                o.push_str(&format!("    public typealias {alias} = {target}\n\n"));
            }
        }
        for f in &d.fields {
            let base = match &f.ty {
                Ty::Str | Ty::Time => "String".to_owned(),
                Ty::Int => "Int".into(),
                Ty::StrList => "[String]".into(),
                Ty::Object => "[String: JSONValue]".into(),
                Ty::Ref(r) => r.clone(),
            };
            let optional = f.nullable || !f.required;
            let ty = if optional { format!("{base}?") } else { base };
            if !f.values.is_empty() {
                let vals: Vec<String> = f.values.iter().map(|v| format!("`{v}`")).collect();
                o.push_str(&format!("    /// One of {}.\n", vals.join(", ")));
            }
            let name = camel(&f.name, false, false);
            if f.ty == Ty::Object {
                // Fixed up after decoding: its own keys are not converted (HostEventDecoding.swift).
                o.push_str("    /// As written (its keys are not converted).\n");
                o.push_str(&format!("    public internal(set) var {name}: {ty}\n"));
            } else {
                o.push_str(&format!("    public let {name}: {ty}\n"));
            }
        }
        o.push_str("}\n");
    }
    o
}

/// Swift: each struct's `init?(reading:)` and `HostEvent.read`, which read an event through
/// `JSONReader` without `JSONDecoder` (which stays the fallback, HostEventDecoding.swift). Keys
/// as `.convertFromSnakeCase` matches them: the schema's own exactly, any other one that could
/// convert to a field's name stops the reader.
fn swift_decode(defs: &[Def]) -> String {
    let mut o = format!("// {HEADER}\n// Regenerate: AGENTAO_UPDATE_BINDINGS=1 cargo test --test host_event_bindings\n\n");
    o.push_str("extension HostEvent {\n    /// The event of a type this binding knows, read by `reader`; nil for another type, or where\n    /// the reader stopped (`reader.failed`).\n    static func read(eventType: UnsafeBufferPointer<UInt8>, _ reader: inout JSONReader) -> HostEvent? {\n");
    for d in defs.iter().filter(|d| d.event_type.is_some()) {
        let t = d.event_type.as_ref().unwrap();
        o.push_str(&format!(
            "        if JSONReader.equal(eventType, \"{t}\") {{ return {}(reading: &reader).map {{ .{}($0) }} }}\n",
            d.name,
            camel(t, false, false)
        ));
    }
    o.push_str("        return nil\n    }\n}\n");
    for d in defs {
        let mut keys: Vec<&str> = Vec::new();
        if d.event_type.is_some() {
            keys.push("event_type");
        }
        keys.extend(d.fields.iter().map(|f| f.name.as_str()));
        let folded: Vec<String> = keys
            .iter()
            .map(|k| format!("\"{}\"", k.replace('_', "").to_lowercase()))
            .collect();
        o.push_str(&format!(
            "\nextension {} {{\n    /// The keys as `JSONReader.unknownKey` compares them.\n    private static let foldedKeys: [StaticString] = [{}]\n\n",
            d.name,
            folded.join(", ")
        ));
        o.push_str("    /// Reads one object (see `JSONReader`); nil where the reader stopped.\n    init?(reading r: inout JSONReader) {\n");
        for f in &d.fields {
            let base = match &f.ty {
                Ty::Str | Ty::Time => "String".to_owned(),
                Ty::Int => "Int".into(),
                Ty::StrList => "[String]".into(),
                Ty::Object => "[String: JSONValue]".into(),
                Ty::Ref(r) => r.clone(),
            };
            o.push_str(&format!(
                "        var {}: {base}?\n",
                camel(&f.name, false, false)
            ));
        }
        o.push_str("        var seen: UInt64 = 0\n        guard r.object() else { return nil }\n        while r.member() {\n");
        let mut bit = 0;
        let mut first = true;
        let mut branch = |o: &mut String, key: &str, body: String, bit: usize| {
            let kw = if first { "            if" } else { " else if" };
            first = false;
            o.push_str(&format!(
                "{kw} r.keyIs(\"{key}\") {{\n                if r.once(&seen, {bit}) {{ {body} }}\n            }}"
            ));
        };
        if d.event_type.is_some() {
            // Its value was read before (JSONReader.leadingString); here it is only one key.
            branch(&mut o, "event_type", "r.skip()".into(), bit);
            bit += 1;
        }
        for f in &d.fields {
            let name = camel(&f.name, false, false);
            // A Swift optional reads a null as nil, as `decodeIfPresent` does.
            let optional = f.nullable || !f.required;
            let read = match (&f.ty, optional) {
                (Ty::Str | Ty::Time, false) => "r.string()".to_owned(),
                (Ty::Str | Ty::Time, true) => "r.optionalString()".into(),
                (Ty::Int, false) => "r.int()".into(),
                (Ty::Int, true) => "r.optionalInt()".into(),
                (Ty::StrList, false) => "r.stringList()".into(),
                (Ty::StrList, true) => "r.optionalStringList()".into(),
                (Ty::Object, false) => "r.jsonObject()".into(),
                (Ty::Object, true) => "r.optionalJSONObject()".into(),
                (Ty::Ref(t), false) => format!("{t}(reading: &r)"),
                (Ty::Ref(t), true) => format!("r.null() ? nil : {t}(reading: &r)"),
            };
            branch(&mut o, &f.name, format!("{name} = {read}"), bit);
            bit += 1;
        }
        assert!(bit <= 64, "{}: at most 64 keys", d.name);
        o.push_str(" else {\n                r.unknownKey(folded: Self.foldedKeys)\n            }\n        }\n");
        let required: Vec<String> = d
            .fields
            .iter()
            .filter(|f| !f.nullable && f.required)
            .map(|f| format!("let {}", camel(&f.name, false, false)))
            .collect();
        let mut guards = vec!["!r.failed".to_owned()];
        guards.extend(required);
        o.push_str(&format!(
            "        guard {} else {{\n            r.fail()\n            return nil\n        }}\n",
            guards.join(", ")
        ));
        let args: Vec<String> = d
            .fields
            .iter()
            .map(|f| {
                let n = camel(&f.name, false, false);
                format!("{n}: {n}")
            })
            .collect();
        o.push_str(&format!(
            "        self.init({})\n    }}\n}}\n",
            args.join(", ")
        ));
    }
    o
}

/// C++: each event's wire names (type, keys, enumerated values) as constants, for hosts that
/// read the JSON the library hands out with a parser of their choice.
fn cpp(defs: &[Def]) -> String {
    let mut o = format!("// {HEADER}\n// Regenerate: AGENTAO_UPDATE_BINDINGS=1 cargo test --test host_event_bindings\n#pragma once\n\n#include <array>\n#include <string_view>\n\nnamespace agentao::host_events {{\n");
    for d in defs {
        let snake = match &d.event_type {
            Some(t) => t.clone(),
            None => camel_to_snake(&d.name),
        };
        o.push_str(&format!("\n/// {}\nstruct {snake} {{\n", summary(&d.doc)));
        if let Some(t) = &d.event_type {
            o.push_str(&format!(
                "    static constexpr std::string_view event_type = \"{t}\";\n"
            ));
        }
        o.push_str(&format!(
            "    /// Every key of its JSON object{}.\n    static constexpr std::array<std::string_view, {}> keys = {{",
            if d.event_type.is_some() { " but `event_type`" } else { "" },
            d.fields.len()
        ));
        let keys: Vec<String> = d.fields.iter().map(|f| format!("\"{}\"", f.name)).collect();
        o.push_str(&keys.join(", "));
        o.push_str("};\n");
        for f in d.fields.iter().filter(|f| !f.values.is_empty()) {
            o.push_str(&format!(
                "    /// The values of `{}`.\n    static constexpr std::array<std::string_view, {}> {}_values = {{{}}};\n",
                f.name,
                f.values.len(),
                f.name,
                f.values
                    .iter()
                    .map(|v| format!("\"{v}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        o.push_str("};\n");
    }
    o.push_str("\n}  // namespace agentao::host_events\n");
    o
}

#[test]
fn generated_binding_event_types_are_fresh() {
    let defs = defs(&schema());
    let update = std::env::var_os("AGENTAO_UPDATE_BINDINGS").is_some();
    let mut stale = Vec::new();
    for (file, text) in [
        (GO, go(&defs)),
        (GO_DECODE, go_decode(&defs)),
        (SWIFT, swift(&defs)),
        (SWIFT_DECODE, swift_decode(&defs)),
        (CPP, cpp(&defs)),
    ] {
        let committed = std::fs::read_to_string(path(file)).unwrap_or_default();
        if committed != text {
            if update {
                std::fs::write(path(file), &text).expect("write the generated file");
            } else {
                stale.push(file);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated bindings {stale:?}: regenerate them with \
         `AGENTAO_UPDATE_BINDINGS=1 cargo test --test host_event_bindings` and commit them"
    );
}

/// The generator reads every event the schema defines, with every field but the discriminator.
#[test]
fn every_event_and_field_of_the_schema_is_generated() {
    let schema = schema();
    let defs = defs(&schema);
    let mapping = schema["discriminator"]["mapping"].as_object().unwrap();
    for (t, _) in mapping {
        let d = defs
            .iter()
            .find(|d| d.event_type.as_deref() == Some(t.as_str()))
            .unwrap_or_else(|| panic!("{t} is generated"));
        let props = schema["$defs"][&d.name]["properties"].as_object().unwrap();
        assert_eq!(d.fields.len() + 1, props.len(), "{t}");
    }
}
