// Command didoedge is the one binary of the project: it parses flags and wires
// the packages together (camera -> runtime -> auxue read-outs -> alerts).
//
// A command's flags are declared by the package that runs it: a type such
// as bench.LatencyFlags with AddFlags(fs), and the method that turns the
// values into that package's config (its errors name the flag). A command
// here makes the FlagSet, calls AddFlags, parses, and wires: opens the
// object store, starts services, handles signals.
//
// Usage: didoedge <command> [flags]. Run `didoedge help` for the list.
package main
