module github.com/agentao/libagentao/bindings/go

go 1.23
