// Command didoedge is the one binary of the project: it parses flags and wires
// the packages together (camera -> runtime -> auxue read-outs -> alerts).
//
// Usage: didoedge <command> [flags]. Run `didoedge help` for the list.
package main
