// Package compose is the end-to-end test of docker-compose.yml (`make test-compose`, build tag
// compose): the real compose file built and started with a unique project name, the README's compose
// walkthrough run as written, then faults across containers — a killed replica, a broker cut off the
// network, a restarted database, a third replica — while events flow, counting lost and duplicated
// deliveries at the demo receiver. On machines without an image registry it builds the stand-in
// images of scripts/standins first.
package compose
