//go:build race

package webhooks

// receiverJitter is how many requests beyond the limit a one-second window at the receiver (or of recorded starts) may see
// for the machine's scheduling delay alone: the race detector slows every goroutine several times.
const receiverJitter = 1

// raceEnabled: the race detector makes sync.Pool drop some of what is put back, so pooled work allocates anew.
const raceEnabled = true
