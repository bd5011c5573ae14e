// Package tests holds Keelson's black-box tests: they build the binary the way the Dockerfile
// does, run `keelson migrate` and several `keelson serve` replicas against the real PostgreSQL and
// RabbitMQ, drive them over HTTP only, and inject faults (SIGKILL, SIGTERM, pg_terminate_backend,
// a cut broker connection). The Dockerfile and docker-compose.yml are checked here too.
package tests
