"""Dataset builders: public releases -> the rudder dataset layout; translation; Hub publishing.

``python -m datasets_scripts build NAME --src RAW --out OUT`` with NAME one of
:data:`BUILDERS`; ``translate`` adds machine-translated captions; ``publish`` uploads a folder.
Each source module documents the release layout it reads.
"""

BUILDERS = {  # module names relative to this package
    "rudder": ".rudder_release",
    "charades_sta": ".charades_sta",
    "didemo": ".didemo",
    "msrvtt": ".msrvtt",
    "videos": ".videos",  # your own video files: decodes them and extracts expert features
}
