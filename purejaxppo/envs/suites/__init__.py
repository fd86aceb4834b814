"""Environment suites reached through `make_env("<suite>:<id>")` (placeholder: owned by the
suites worker; this branch only needs the package to exist)."""
