"""Dataset builders: public releases -> the rudder dataset layout; translation; Hub publishing.

``python -m datasets_scripts build NAME --src RAW --out OUT`` with NAME one of
:data:`BUILDERS`; ``translate`` adds machine-translated captions; ``publish`` uploads a folder.
Each source module documents the release layout it reads.
"""

BUILDERS = {
    "rudder": "datasets_scripts.rudder_release",
    "charades_sta": "datasets_scripts.charades_sta",
    "didemo": "datasets_scripts.didemo",
    "msrvtt": "datasets_scripts.msrvtt",
}
