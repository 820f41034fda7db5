// Package coherence is the INV/ACK protocol core (placeholder doc; see below).
package coherence
