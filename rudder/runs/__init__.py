"""Run folders: the files inside one (layout) and creating, resuming and loading them
(folders)."""
