"""Configuration: the pipelines file's schema and loader, and the one declaration of what is public.

The modules are imported by their full path; this package imports nothing."""
