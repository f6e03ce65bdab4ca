// Package workpool runs functions fed from one goroutine on a bounded
// number of workers: the copies of cairn sync, backup and restore, fed
// from lists read in order as they go.
package workpool
