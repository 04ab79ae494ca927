// A clock reader for vclock's tests: for each line on stdin, prints the wall clock and the
// monotonic clock as this process sees them (ns); "q" ends it. Go's runtime calls the vDSO
// itself (no libc); built with CGO_ENABLED=0 it is a static binary.
package main

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

func main() {
	start := time.Now()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "q" {
			return
		}
		now := time.Now()
		// Sub uses the monotonic readings of both times: the monotonic clock, from start.
		fmt.Printf("%d %d\n", now.UnixNano(), now.Sub(start).Nanoseconds())
	}
}
