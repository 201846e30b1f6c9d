// Package userauth carries the registry's user-authority constructor to the human
// controller (actors/controller) and to nothing outside troupe: an internal
// package cannot be imported by another module, and a package variable cannot be
// reached by reflection, so no public-API Go code can mint a user-authority
// registry.Caller (docs/THREAT-MODEL.md).
package userauth

// ForSession returns registry.Caller's user authority over session (SPEC §4: the
// registered controller acting for the user, who sees what that session sees). It
// is set by package registry's init and returns a registry.Caller as any, because
// this package sits below registry and cannot name its types.
var ForSession func(session string) any
