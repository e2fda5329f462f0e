"""The regression gate and the environment A/B: `rules` (the gate file), `decide` (pure
decisions, structured verdicts), `render` (their text), `interleave` + `serve` (two sides
measured in randomized blocks), `command` (`scanbench gate`), `environments` + `compare`
(`scanbench ab`: the same cells in two environments)."""
