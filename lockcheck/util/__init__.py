"""Small tools every wing uses: escaping, wording, option files, strict JSON, progress, worker pools."""
