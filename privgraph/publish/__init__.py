"""Publish: the artifact stores, the manifest and its seal, and the owner's private records.

The modules are imported by their full path; this package imports nothing."""
