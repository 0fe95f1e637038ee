"""sandguard's Python client: the standard library only. Modules:
session (environments' sessions: Session, SessionCodeTool, SessionEnv) and
rllm (a CodeTool for rLLM over `sandguard serve`'s /tci/execute)."""
