module lockpick.dev/porcupine-side-by-side

go 1.16

require github.com/anishathalye/porcupine v0.0.0

// The bench (benches/porcupine.rs) points this at a local checkout: nothing is downloaded.
replace github.com/anishathalye/porcupine => ./porcupine-src
