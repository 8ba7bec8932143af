// swift-tools-version:6.0
// The Swift binding as SwiftPM takes it from this repository's git URL and a version tag
// (`.package(url: ".../libagentao.git", from: "0.1.0")`): SwiftPM reads only a repository's
// root manifest, so this one names the sources in bindings/swift, whose own Package.swift
// serves path dependencies and the binding's tests. Keep the two target lists alike.
import PackageDescription

let package = Package(
    name: "Agentao",
    products: [
        .library(name: "Agentao", targets: ["Agentao"]),
    ],
    targets: [
        // The C library, found through pkg-config (agentao.pc from scripts/install.sh).
        .systemLibrary(name: "CAgentao", path: "bindings/swift/Sources/CAgentao", pkgConfig: "agentao"),
        .target(name: "Agentao", dependencies: ["CAgentao"], path: "bindings/swift/Sources/Agentao"),
    ]
)
