# Sourced before a `cargo lambda build` and the `sam build` after it, by
# scripts/sam-build-check.sh and scripts/sam-local.sh: takes the workspace's
# lambda build lock, held until the sourcing script exits.
#
# One build at a time: `make test` runs sam-build-check's builds early in
# the background (scripts/ahead.sh) and again in its sam-build stage. Cargo
# serialises two compilations, but cargo-lambda then MOVES each binary from
# target/<triple>/release/ into target/lambda/<bin>/bootstrap; a second
# build re-links the binary the first is moving, and one of them finds it
# gone ("error moving the binary ... No such file or directory").
mkdir -p "$ROOT/target"
exec 8>"$ROOT/target/.lambda-build.lock"
flock 8
