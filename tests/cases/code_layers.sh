# variants: plain asan
# The direction of dependencies between the layers (docs/architecture.md), proved from the built
# objects' undefined symbols by mk/check-layers.sh: base <- pool, ledger <- report <- shim, and the
# tools use only pool and base.
. "$ROOT/tests/lib.sh"
sh "$ROOT/mk/check-layers.sh" "$ABS_BUILD"
