"""What the simulated sample captions say: lexicon, word forms, sentence templates, toy recipes.

The sample generator (:mod:`rudder.data.sample`) writes captions in Marathi, Hindi, English,
Tamil and Telugu from this curated lexicon. Every noun has the case forms its templates need
(Hindi/Marathi direct and oblique stems; Tamil accusative, locative, dative, instrumental and
sociative; Telugu accusative, locative, dative, instrumental and 'on'), every verb its polite
imperative. Templates are kept simple so that each language's case marking and verb form stay
grammatical: Hindi ``X को Y में डालिए``, Marathi ``X Yमध्ये घाला``, Tamil ``Xஐ Yஇல் செருகவும்``
(with the hard-consonant doubling after an accusative or dative), Telugu ``Xను Yలో చొప్పించండి``.
Concept ids (``n:bottle``, ``v:cut``) are language-independent; ``sample_lexicon.tsv`` lists
one lemma per (concept, language), as :func:`render_lexicon_tsv` renders it.
"""

from __future__ import annotations

import re
import unicodedata

LANGS = ("mr", "hi", "en", "ta", "te")

# fmt: off
# concept | en lemma | en indefinite | hi direct | hi oblique | mr direct | mr oblique | ta | te
_NOUN_ROWS = [
    ("bottle", "bottle", "a bottle", "बोतल", "बोतल", "बाटली", "बाटली", "பாட்டில்", "సీసా"),
    ("straw", "straw", "a straw", "स्ट्रॉ", "स्ट्रॉ", "स्ट्रॉ", "स्ट्रॉ", "ஸ்ட்ரா", "స్ట్రా"),
    ("magnet", "magnet", "a magnet", "चुंबक", "चुंबक",
     "लोहचुंबक", "लोहचुंबका", "காந்தம்", "అయస్కాంతం"),
    ("card_sheet", "card sheet", "a card sheet", "कार्ड शीट", "कार्ड शीट", "कार्डशीट", "कार्डशीट",
     "அட்டைத்தாள்", "చార్టు కాగితం"),
    ("rubber_band", "rubber band", "a rubber band", "रबर बैंड", "रबर बैंड", "रबर बँड", "रबर बँड",
     "ரப்பர் பேண்ட்", "రబ్బరు బ్యాండు"),
    ("balloon", "balloon", "a balloon", "गुब्बारा", "गुब्बारे", "फुगा", "फुग्या", "பலூன்", "బుడగ"),
    ("paper_cup", "paper cup", "a paper cup", "कागज़ का कप", "कागज़ के कप", "कागदी कप", "कागदी कप",
     "காகிதக் கோப்பை", "కాగితపు గ్లాసు"),
    ("ice_cream_stick", "ice-cream stick", "an ice-cream stick", "आइसक्रीम की डंडी",
     "आइसक्रीम की डंडी", "आइस्क्रीमची काडी", "आइस्क्रीमच्या काडी", "ஐஸ்கிரீம் குச்சி",
     "ఐస్క్రీమ్ పుల్ల"),
    ("thread", "thread", "some thread", "धागा", "धागे", "दोरा", "दोऱ्या", "நூல்", "దారం"),
    ("wheel", "wheel", "a wheel", "पहिया", "पहिये", "चाक", "चाका", "சக்கரம்", "చక్రం"),
    ("cardboard", "cardboard", "a piece of cardboard", "गत्ता", "गत्ते",
     "पुठ्ठा", "पुठ्ठ्या", "அட்டை", "అట్ట"),
    ("glue", "glue", "some glue", "गोंद", "गोंद", "गोंद", "गोंदा", "பசை", "జిగురు"),
    ("scissors", "scissors", "a pair of scissors", "कैंची", "कैंची",
     "कात्री", "कात्री", "கத்தரிக்கோல்", "కత్తెర"),
    ("tape", "tape", "some tape", "टेप", "टेप", "टेप", "टेप", "டேப்", "టేపు"),
    ("pencil", "pencil", "a pencil", "पेंसिल", "पेंसिल",
     "पेन्सिल", "पेन्सिली", "பென்சில்", "పెన్సిలు"),
    ("paper", "paper", "a sheet of paper", "कागज़", "कागज़", "कागद", "कागदा", "காகிதம்", "కాగితం"),
    ("clay", "clay", "some clay", "मिट्टी", "मिट्टी", "माती", "माती", "களிமண்", "మట్టి"),
    ("matchbox", "matchbox", "a matchbox", "माचिस की डिब्बी", "माचिस की डिब्बी",
     "काड्यापेटी", "काड्यापेटी", "தீப்பெட்டி", "అగ్గిపెట్టె"),
    ("nail", "nail", "a nail", "कील", "कील", "खिळा", "खिळ्या", "ஆணி", "మేకు"),
    ("pipe", "pipe", "a pipe", "पाइप", "पाइप", "पाइप", "पाइप", "குழாய்", "గొట్టం"),
    ("bottle_cap", "bottle cap", "a bottle cap", "ढक्कन", "ढक्कन", "झाकण", "झाकणा", "மூடி", "మూత"),
    ("battery", "battery", "a battery", "बैटरी", "बैटरी", "बॅटरी", "बॅटरी", "பேட்டரி", "బ్యాటరీ"),
    ("motor", "motor", "a small motor", "मोटर", "मोटर", "मोटर", "मोटर", "மோட்டார்", "మోటారు"),
    ("wire", "wire", "a piece of wire", "तार", "तार", "तार", "तारे", "கம்பி", "తీగ"),
    ("syringe", "syringe", "a syringe", "सिरिंज", "सिरिंज",
     "सिरिंज", "सिरिंज", "சிரிஞ்ச்", "సిరంజి"),
    ("sketch_pen", "sketch pen", "a sketch pen", "स्केच पेन", "स्केच पेन", "स्केच पेन", "स्केच पेन",
     "ஸ்கெட்ச் பேனா", "స్కెచ్ పెన్ను"),
    ("water", "water", "some water", "पानी", "पानी", "पाणी", "पाण्या", "தண்ணீர்", "నీళ్ళు"),
    ("button", "button", "a button", "बटन", "बटन", "बटण", "बटणा", "பொத்தான்", "గుండీ"),
    ("newspaper", "newspaper", "a newspaper", "अख़बार", "अख़बार", "वर्तमानपत्र", "वर्तमानपत्रा",
     "செய்தித்தாள்", "వార్తాపత్రిక"),
    ("pin", "pin", "a pin", "पिन", "पिन", "टाचणी", "टाचणी", "குண்டூசி", "గుండుసూది"),
    ("candle", "candle", "a candle", "मोमबत्ती", "मोमबत्ती",
     "मेणबत्ती", "मेणबत्ती", "மெழுகுவர்த்தி", "కొవ్వొత్తి"),
    ("cloth", "cloth", "a piece of cloth", "कपड़ा", "कपड़े", "कापड", "कापडा", "துணி", "గుడ్డ"),
    ("box", "box", "a box", "डिब्बा", "डिब्बे", "खोका", "खोक्या", "பெட்டி", "పెట్టె"),
    ("bamboo_skewer", "bamboo skewer", "a bamboo skewer", "बाँस की तीली", "बाँस की तीली",
     "बांबूची काडी", "बांबूच्या काडी", "மூங்கில் குச்சி", "వెదురు పుల్ల"),
]
# Forms the Tamil/Telugu rules below do not produce (gemination, irregular oblique stems).
_TA_IRREGULAR = {
    "களிமண்": ("களிமண்ணை", "களிமண்ணில்", "களிமண்ணுக்கு", "களிமண்ணால்", "களிமண்ணுடன்"),
    "டேப்": ("டேப்பை", "டேப்பில்", "டேப்புக்கு", "டேப்பால்", "டேப்புடன்"),
}
_TE_IRREGULAR = {"నీళ్ళు": ("నీటిని", "నీటిలో", "నీటికి", "నీటితో", "నీటిపై")}

# concept | en lemma | "lemma imperative" in hi, mr, ta, te
_VERB_ROWS = [
    ("cut", "cut", "काटना काटिए", "कापणे कापा", "வெட்டு வெட்டவும்", "కత్తిరించు కత్తిరించండి"),
    ("fold", "fold", "मोड़ना मोड़िए", "दुमडणे दुमडा", "மடி மடிக்கவும்", "మడచు మడవండి"),
    ("stick", "stick", "चिपकाना चिपकाइए", "चिकटवणे चिकटवा", "ஒட்டு ஒட்டவும்",
     "అతికించు అతికించండి"),
    ("attach", "attach", "जोड़ना जोड़िए", "जोडणे जोडा", "இணை இணைக்கவும்", "జోడించు జోడించండి"),
    ("tie", "tie", "बाँधना बाँधिए", "बांधणे बांधा", "கட்டு கட்டவும்", "కట్టు కట్టండి"),
    ("insert", "insert", "डालना डालिए", "घालणे घाला", "செருகு செருகவும்", "చొప్పించు చొప్పించండి"),
    ("paint", "paint", "रंगना रंगिए", "रंगवणे रंगवा", "பூசு பூசவும்", "రంగులద్దు రంగులద్దండి"),
    ("pierce", "pierce", "छेदना छेदिए", "पाडणे पाडा", "துளையிடு துளையிடவும்", "గుచ్చు గుచ్చండి"),
    ("roll", "roll", "लपेटना लपेटिए", "गुंडाळणे गुंडाळा", "சுருட்டு சுருட்டவும்",
     "చుట్టు చుట్టండి"),
    ("blow", "blow", "फूँकना फूँकिए", "फुंकणे फुंका", "ஊது ஊதவும்", "ఊదు ఊదండి"),
    ("fix", "fix", "लगाना लगाइए", "बसवणे बसवा", "பொருத்து பொருத்தவும்", "బిగించు బిగించండి"),
    ("draw", "draw", "बनाना बनाइए", "काढणे काढा", "வரை வரையவும்", "గీయు గీయండి"),
    ("measure", "measure", "नापना नापिए", "मोजणे मोजा", "அள அளக்கவும்", "కొలుచు కొలవండి"),
    ("fill", "fill", "भरना भरिए", "भरणे भरा", "நிரப்பு நிரப்பவும்", "నింపు నింపండి"),
    ("cover", "cover", "ढकना ढकिए", "झाकणे झाका", "மூடு மூடவும்", "కప్పు కప్పండి"),
    ("spin", "spin", "घुमाना घुमाइए", "फिरवणे फिरवा", "சுழற்று சுழற்றவும்", "తిప్పు తిప్పండి"),
    ("pull", "pull", "खींचना खींचिए", "ओढणे ओढा", "இழு இழுக்கவும்", "లాగు లాగండి"),
    ("place", "place", "रखना रखिए", "ठेवणे ठेवा", "வை வைக்கவும்", "ఉంచు ఉంచండి"),
]
# Arguments per action: x object, y goal/second object, i optional instrument.
ACTION_ARGS = {
    "cut": "xi", "fold": "x", "stick": "xyi", "attach": "xy", "tie": "xy", "insert": "xy",
    "paint": "x", "pierce": "xi", "roll": "x", "blow": "x", "fix": "xy", "draw": "xi",
    "measure": "x", "fill": "xy", "cover": "xy", "spin": "x", "pull": "x", "place": "xy",
}
# Clause templates: "{v}" is the imperative; "{x:case}" a noun form. With an instrument the
# second template is used ("{i:case}").
_CLAUSES = {
    "en": {"cut": ("{v} {x:def}", "{v} {x:def} with {i:def}"), "fold": ("{v} {x:def}",),
           "stick": ("{v} {x:def} on {y:def}", "{v} {x:def} on {y:def} with {i:def}"),
           "attach": ("{v} {x:def} to {y:def}",), "tie": ("{v} {x:def} to {y:def}",),
           "insert": ("{v} {x:def} into {y:def}",), "paint": ("{v} {x:def}",),
           "pierce": ("{v} {x:def}", "{v} {x:def} with {i:def}"), "roll": ("{v} {x:def}",),
           "blow": ("{v} into {x:def}",), "fix": ("{v} {x:def} on {y:def}",),
           "draw": ("{v} a circle on {x:def}", "{v} a circle on {x:def} with {i:def}"),
           "measure": ("{v} {x:def}",), "fill": ("{v} {x:def} with {y:bare}",),
           "cover": ("{v} {x:def} with {y:def}",), "spin": ("{v} {x:def}",),
           "pull": ("{v} {x:def}",), "place": ("{v} {x:def} on {y:def}",)},
    "hi": {"cut": ("{x:obl} को {v}", "{i:obl} से {x:obl} को {v}"), "fold": ("{x:obl} को {v}",),
           "stick": ("{x:obl} को {y:obl} पर {v}", "{i:obl} से {x:obl} को {y:obl} पर {v}"),
           "attach": ("{x:obl} को {y:obl} से {v}",), "tie": ("{x:obl} को {y:obl} से {v}",),
           "insert": ("{x:obl} को {y:obl} में {v}",), "paint": ("{x:obl} को {v}",),
           "pierce": ("{x:obl} को {v}", "{i:obl} से {x:obl} को {v}"), "roll": ("{x:obl} को {v}",),
           "blow": ("{x:obl} में {v}",), "fix": ("{x:obl} को {y:obl} पर {v}",),
           "draw": ("{x:obl} पर एक गोला {v}", "{i:obl} से {x:obl} पर एक गोला {v}"),
           "measure": ("{x:obl} को {v}",), "fill": ("{x:obl} में {y:dir} {v}",),
           "cover": ("{x:obl} को {y:obl} से {v}",), "spin": ("{x:obl} को {v}",),
           "pull": ("{x:obl} को {v}",), "place": ("{x:obl} को {y:obl} पर {v}",)},
    "mr": {"cut": ("{x:dir} {v}", "{i:obl}ने {x:dir} {v}"), "fold": ("{x:dir} {v}",),
           "stick": ("{x:dir} {y:obl}वर {v}", "{i:obl}ने {x:dir} {y:obl}वर {v}"),
           "attach": ("{x:dir} {y:obl}ला {v}",), "tie": ("{x:dir} {y:obl}ला {v}",),
           "insert": ("{x:dir} {y:obl}मध्ये {v}",), "paint": ("{x:dir} {v}",),
           "pierce": ("{x:obl}ला भोक {v}", "{i:obl}ने {x:obl}ला भोक {v}"), "roll": ("{x:dir} {v}",),
           "blow": ("{x:obl}मध्ये {v}",), "fix": ("{x:dir} {y:obl}वर {v}",),
           "draw": ("{x:obl}वर एक वर्तुळ {v}", "{i:obl}ने {x:obl}वर एक वर्तुळ {v}"),
           "measure": ("{x:dir} {v}",), "fill": ("{x:obl}मध्ये {y:dir} {v}",),
           "cover": ("{x:dir} {y:obl}ने {v}",), "spin": ("{x:dir} {v}",),
           "pull": ("{x:dir} {v}",), "place": ("{x:dir} {y:obl}वर {v}",)},
    "ta": {"cut": ("{x:acc} {v}", "{i:ins} {x:acc} {v}"), "fold": ("{x:acc} {v}",),
           "stick": ("{x:acc} {y:loc} {v}", "{i:ins} {x:acc} {y:loc} {v}"),
           "attach": ("{x:acc} {y:soc} {v}",), "tie": ("{x:acc} {y:loc} {v}",),
           "insert": ("{x:acc} {y:loc} {v}",), "paint": ("{x:dat} வண்ணம் {v}",),
           "pierce": ("{x:loc} {v}", "{i:ins} {x:loc} {v}"), "roll": ("{x:acc} {v}",),
           "blow": ("{x:loc} {v}",), "fix": ("{x:acc} {y:loc} {v}",),
           "draw": ("{x:loc} ஒரு வட்டம் {v}", "{i:ins} {x:loc} ஒரு வட்டம் {v}"),
           "measure": ("{x:acc} {v}",), "fill": ("{x:loc} {y:dir} {v}",),
           "cover": ("{x:acc} {y:ins} {v}",), "spin": ("{x:acc} {v}",),
           "pull": ("{x:acc} {v}",), "place": ("{x:acc} {y:loc} {v}",)},
    "te": {"cut": ("{x:acc} {v}", "{i:ins} {x:acc} {v}"), "fold": ("{x:acc} {v}",),
           "stick": ("{x:acc} {y:on} {v}", "{i:ins} {x:acc} {y:on} {v}"),
           "attach": ("{x:acc} {y:dat} {v}",), "tie": ("{x:acc} {y:dat} {v}",),
           "insert": ("{x:acc} {y:loc} {v}",), "paint": ("{x:dat} {v}",),
           "pierce": ("{x:acc} {v}", "{i:ins} {x:acc} {v}"), "roll": ("{x:acc} {v}",),
           "blow": ("{x:loc} {v}",), "fix": ("{x:acc} {y:dat} {v}",),
           "draw": ("{x:on} ఒక వృత్తం {v}", "{i:ins} {x:on} ఒక వృత్తం {v}"),
           "measure": ("{x:acc} {v}",), "fill": ("{x:loc} {y:dir} {v}",),
           "cover": ("{x:acc} {y:ins} {v}",), "spin": ("{x:acc} {v}",),
           "pull": ("{x:acc} {v}",), "place": ("{x:acc} {y:on} {v}",)},
}
# Listing captions (three openings, and one for a second listing caption), "and", full stop.
_LISTING = {
    "en": ("For this toy we need {list}.", "The materials needed are {list}.",
           "To make this toy, take {list}.", "We also need {list}."),
    "hi": ("इस खिलौने के लिए हमें {list} चाहिए।", "इस खिलौने के लिए ज़रूरी सामान: {list}।",
           "इस खिलौने के लिए {list} लीजिए।", "हमें {list} भी चाहिए।"),
    "mr": ("या खेळण्यासाठी आपल्याला {list} लागतील.", "या खेळण्यासाठी लागणारे साहित्य: {list}.",
           "या खेळण्यासाठी {list} घ्या.", "आपल्याला {list} सुद्धा लागतील."),
    "ta": ("இந்த பொம்மைக்கு {list} தேவை.", "தேவையான பொருட்கள்: {list}.",
           "இந்த பொம்மையைச் செய்ய {list} தேவை.", "மேலும் {list} தேவை."),
    "te": ("ఈ బొమ్మ కోసం మనకు {list} కావాలి.", "కావలసిన వస్తువులు: {list}.",
           "ఈ బొమ్మ తయారు చేయడానికి {list} కావాలి.", "అలాగే మనకు {list} కూడా కావాలి."),
}
_AND = {"en": "and", "hi": "और", "mr": "आणि", "ta": "மற்றும்", "te": "మరియు"}
_STOP = {"en": ".", "hi": "।", "mr": ".", "ta": ".", "te": "."}
# Openings of a one-step describing caption, and the "first ..., then ..." frame of two steps.
_PREFIXES = {
    "en": ("", "Now ", "Next, ", "Then "), "hi": ("", "अब ", "इसके बाद ", "फिर "),
    "mr": ("", "आता ", "यानंतर ", "मग "), "ta": ("", "இப்போது ", "அடுத்து ", "பிறகு "),
    "te": ("", "ఇప్పుడు ", "తరువాత ", "ఆ తర్వాత "),
}
_TWO_STEPS = {"en": "First {a}, then {b}", "hi": "पहले {a}, फिर {b}", "mr": "आधी {a}, मग {b}",
              "ta": "முதலில் {a}, பிறகு {b}", "te": "ముందుగా {a}, తర్వాత {b}"}

# Toy types: role -> candidate materials, and the ordered steps "action x [y] [i]" over roles
# (ACTION_ARGS says whether the second role is y or the instrument i). Roles share materials
# across toys (scissors, thread, straw, pins, tape, ...), so partial matches are frequent.
TOYS = {
    "balloon_rocket": (
        {"B": "balloon", "T": "thread wire", "S": "straw pipe", "K": "scissors",
         "P": "bamboo_skewer ice_cream_stick", "F": "tape glue"},
        "cut S K; insert T S; tie T P; blow B; stick S B F; pull T"),
    "magnet_car": (
        {"C": "matchbox box", "M": "magnet", "W": "wheel bottle_cap button", "N": "pin nail",
         "A": "bamboo_skewer ice_cream_stick", "G": "glue tape", "B": "card_sheet cardboard"},
        "paint C; pierce W N; insert A W; attach A C; stick M C G; place C B"),
    "bottle_windmill": (
        {"B": "bottle", "L": "card_sheet paper cardboard", "A": "bamboo_skewer wire",
         "K": "scissors", "N": "pin nail", "D": "sketch_pen pencil"},
        "draw L D; cut L K; fold L; pierce B N; insert A B; fix L A; spin L"),
    "hydraulic_arm": (
        {"S": "syringe", "P": "pipe straw", "W": "water", "T": "ice_cream_stick bamboo_skewer",
         "G": "glue tape", "B": "cardboard box"},
        "fill S W; attach P S; stick T B G; fix S T; pull S"),
    "cup_phone": (
        {"C": "paper_cup", "T": "thread wire", "N": "pin nail", "K": "scissors",
         "A": "button ice_cream_stick matchbox"},
        "paint C; pierce C N; cut T K; insert T C; tie T A; pull T"),
    "rubber_band_car": (
        {"B": "box matchbox bottle", "W": "wheel bottle_cap", "A": "bamboo_skewer pencil",
         "R": "rubber_band", "N": "nail pin", "G": "tape glue"},
        "pierce B N; insert A B; fix W A; tie R A; stick R B G; spin W"),
    "pinwheel": (
        {"P": "paper card_sheet newspaper", "K": "scissors", "D": "pencil sketch_pen",
         "N": "pin", "S": "bamboo_skewer straw ice_cream_stick"},
        "measure P; draw P D; cut P K; fold P; pierce P N; fix P S; spin P"),
    "motor_fan": (
        {"M": "motor", "B": "battery", "W": "wire", "L": "card_sheet bottle_cap cardboard",
         "S": "box bottle", "G": "tape glue", "K": "scissors"},
        "attach W M; attach W B; cut L K; fix L M; stick M S G; spin L"),
    "whirligig": (
        {"B": "button bottle_cap cardboard", "T": "thread wire", "N": "nail pin"},
        "paint B; pierce B N; insert T B; tie T B; spin B; pull T"),
    "newspaper_doll": (
        {"P": "newspaper paper", "T": "thread rubber_band wire", "C": "clay cloth",
         "D": "sketch_pen pencil", "B": "bottle paper_cup"},
        "roll P; tie T P; insert P B; cover B C; draw B D; paint B"),
    "parachute": (
        {"C": "cloth newspaper paper", "K": "scissors", "T": "thread",
         "W": "button bottle_cap clay matchbox", "D": "pencil sketch_pen"},
        "measure C; draw C D; cut C K; tie T C; tie T W; fold C; pull T"),
    "fishing_game": (
        {"C": "card_sheet cardboard paper", "D": "sketch_pen pencil", "K": "scissors",
         "N": "pin nail", "R": "bamboo_skewer ice_cream_stick straw", "T": "thread", "M": "magnet"},
        "draw C D; cut C K; paint C; fix N C; tie T R; tie M T"),
    "fountain": (
        {"B": "bottle", "N": "nail pin", "S": "straw pipe", "W": "water", "G": "clay tape glue"},
        "pierce B N; insert S B; stick S B G; fill B W; blow S"),
    "straw_flute": (
        {"S": "straw pipe", "K": "scissors", "N": "pin nail", "G": "tape glue",
         "C": "card_sheet paper"},
        "measure S; cut S K; pierce S N; roll C; stick C S G; blow S"),
    "candle_seesaw": (
        {"C": "candle", "N": "pin nail", "U": "paper_cup bottle matchbox", "K": "scissors",
         "G": "clay glue", "B": "cardboard box"},
        "measure C; cut C K; pierce C N; place C U; stick U B G; spin C"),
}

# The dataset card's prose; rudder.data.sample fills in its settings.
CARD_TITLE = "rudder sample (simulated RUDDER-like toy-making videos)"
CARD_DESCRIPTION = """\
**This dataset is SIMULATED.** It contains no real videos, speech or human annotations: every
caption, label and feature was produced by `rudder.data.sample` (generator version {version},
seed {seed}) to exercise rudder's loading, training, evaluation and app code paths on a
RUDDER-like corpus (toy-making videos with captions in Marathi, Hindi, English, Tamil and
Telugu). Numbers obtained on it say nothing about real multilingual video retrieval.

It is frozen: the generator is not tuned to favour any loss or model; any change to its output
bumps the generator version (and the cache folder `sample-v<version>`). Licence: {license}.
"""
CARD_HOW_BUILT = """\
- {videos} videos, each a recipe of one of {toys} toy types (3-6 materials from a lexicon of
  {materials}, 2-5 of {actions} actions); durations 60-300 s; splits {splits} by video.
- 5-8 timed captions per video and language, written from templates with each language's case
  forms and polite imperatives: *listing* captions name the materials, *describing* captions
  one or two steps. Marathi, Hindi and English for every video; Tamil and Telugu for {ta} / {te}
  of videos, marked `machine_translated` as RUDDER's (Google Translate) were, though they are
  generated the same way.
- `nouns`, `verbs` (lemmas) and `noun_classes`, `verb_classes` (concept ids of
  `rudder/data/sample_lexicon.tsv`) are the generator's truth, standing in for manual
  annotations.
- `relations`: pairs of training captions (mr/hi/en) labelled by four simulated annotators from
  the truth: 2 positive (same segment or identical classes), 3 description (a describing caption
  applying the listed materials, or the next step), 1 partial (a shared material or action),
  0 negative.
- Features: a fixed random projection of a unit evidence vector plus Gaussian noise (std
  {noise}; distractor concepts at weight {distractor}): `object` sees the materials, `action`
  the actions, `scene` a toy-type mixture, `audio@<lang>` 4-12 frames of narrated segments
  (their materials and actions) and distractor frames. audio@mr for every video; (hi, ta, te)
  audio combinations: {audio}. scene/object/action are each missing for {missing} of videos;
  a missing expert has no feature row.
"""

# fmt: on


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _tamil_cases(word: str) -> dict:
    """Tamil accusative, locative, dative, instrumental, sociative by the stem's final letter."""
    if word in _TA_IRREGULAR:
        forms = _TA_IRREGULAR[word]
    elif word.endswith("ம்"):  # -am nouns take the oblique stem -att-
        base = word[:-2] + "த்த"
        forms = (base + "ை", base + "ில்", base + "ுக்கு", base + "ால்", base + "ுடன்")
    elif word.endswith("ய்"):
        base = word[:-1]
        forms = (base + "ை", base + "ில்", word + "க்கு", base + "ால்", base + "ுடன்")
    elif word.endswith("்"):
        base = word[:-1]
        forms = (base + "ை", base + "ில்", base + "ுக்கு", base + "ால்", base + "ுடன்")
    elif word.endswith(("ி", "ீ", "ை")):  # y-glide
        forms = (word + "யை", word + "யில்", word + "க்கு", word + "யால்", word + "யுடன்")
    elif word.endswith(("ா", "ோ", "ூ")):  # v-glide
        forms = (word + "வை", word + "வில்", word + "வுக்கு", word + "வால்", word + "வுடன்")
    else:
        raise ValueError(f"no Tamil case rule for {word!r}; add it to _TA_IRREGULAR")
    return dict(zip(("acc", "loc", "dat", "ins", "soc"), forms, strict=True), dir=word)


def _telugu_cases(word: str) -> dict:
    """Telugu accusative, locative, dative, instrumental and 'on' by the stem's final letter."""
    if word in _TE_IRREGULAR:
        forms = _TE_IRREGULAR[word]
    elif word.endswith("ం"):  # -am nouns: -aanni, -aaniki
        base = word[:-1]
        forms = (base + "ాన్ని", word + "లో", base + "ానికి", word + "తో", word + "పై")
    elif word.endswith(("ి", "ీ")):
        forms = (word + "ని", word + "లో", word + "కి", word + "తో", word + "పై")
    else:
        forms = (word + "ను", word + "లో", word + "కు", word + "తో", word + "పై")
    return dict(zip(("acc", "loc", "dat", "ins", "on"), forms, strict=True), dir=word)


def _build_nouns() -> dict:
    nouns = {}
    for name, en, en_indef, hi, hi_obl, mr, mr_obl, ta, te in _NOUN_ROWS:
        nouns["n:" + name] = {
            "en": {"lemma": en, "indef": en_indef, "def": "the " + en, "bare": en},
            "hi": {"lemma": _nfc(hi), "dir": _nfc(hi), "obl": _nfc(hi_obl)},
            "mr": {"lemma": _nfc(mr), "dir": _nfc(mr), "obl": _nfc(mr_obl)},
            "ta": {"lemma": _nfc(ta), **{k: _nfc(v) for k, v in _tamil_cases(ta).items()}},
            "te": {"lemma": _nfc(te), **{k: _nfc(v) for k, v in _telugu_cases(te).items()}},
        }
    return nouns


def _build_verbs() -> dict:
    verbs = {}
    for name, en, hi, mr, ta, te in _VERB_ROWS:
        entry = {"en": {"lemma": en, "imp": en}}
        for lang, pair in (("hi", hi), ("mr", mr), ("ta", ta), ("te", te)):
            lemma, imperative = _nfc(pair).split(" ")
            entry[lang] = {"lemma": lemma, "imp": imperative}
        verbs["v:" + name] = entry
    return verbs


NOUNS = _build_nouns()
VERBS = _build_verbs()
MATERIALS = tuple(NOUNS)
ACTIONS = tuple(VERBS)
_SLOT = re.compile(r"\{([xyi]):(\w+)\}")
_TAMIL_HARD = "கசதப"


def lexicon_rows() -> list[tuple[str, str, str, str]]:
    """``(concept_id, pos, lang, lemma)`` rows: nouns, then verbs, languages in LANGS order."""
    rows = [(c, "noun", lang, NOUNS[c][lang]["lemma"]) for c in MATERIALS for lang in LANGS]
    return rows + [(c, "verb", lang, VERBS[c][lang]["lemma"]) for c in ACTIONS for lang in LANGS]


def render_lexicon_tsv() -> str:
    """The text of ``sample_lexicon.tsv`` (header ``concept_id pos lang lemma``)."""
    lines = ["concept_id\tpos\tlang\tlemma"] + ["\t".join(row) for row in lexicon_rows()]
    return "\n".join(lines) + "\n"


def surface_forms(concept: str, lang: str) -> set[str]:
    """Every form of a concept the templates can write in ``lang`` (for checks and tests)."""
    if concept in NOUNS:
        return {v for k, v in NOUNS[concept][lang].items() if k != "lemma"}
    return {VERBS[concept][lang]["imp"]}


def _clause(lang: str, action: str, x: str, y: str | None, i: str | None) -> str:
    """One imperative clause without final punctuation (Tamil sandhi applied)."""
    templates = _CLAUSES[lang][action.removeprefix("v:")]
    template = templates[1] if i is not None else templates[0]
    slots = {"x": x, "y": y, "i": i}
    sandhi = "\u0001"

    def fill(match):
        form = NOUNS[slots[match.group(1)]][lang][match.group(2)]
        return form + sandhi if lang == "ta" and match.group(2) in ("acc", "dat") else form

    text = _SLOT.sub(fill, template).replace("{v}", VERBS[action][lang]["imp"])
    # Tamil doubles a hard consonant after an accusative or dative: "நூலைக் கட்டவும்".
    text = re.sub(sandhi + f" ([{_TAMIL_HARD}])", lambda m: m.group(1) + "் " + m.group(1), text)
    return text.replace(sandhi, "")


def _join(lang: str, items: list[str]) -> str:
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + f" {_AND[lang]} " + items[-1]


def render_listing(lang: str, materials: list[str], variant: int) -> str:
    """A listing caption naming ``materials``; ``variant`` 0-2 opens it, 3 is "we also need"."""
    case = "indef" if lang == "en" else "dir"
    items = [NOUNS[m][lang][case] for m in materials]
    text = _LISTING[lang][variant].format(list=_join(lang, items))
    return text[0].upper() + text[1:] if lang == "en" else text


def render_describing(lang: str, steps: list[tuple], prefix: int) -> str:
    """A describing caption of one step (with opening ``prefix`` 0-3) or two steps.

    A step is ``(action, x, y, i)`` with concept ids (``y``/``i`` may be None).
    """
    clauses = [_clause(lang, *step) for step in steps]
    if lang == "en":
        clauses = [c[0].lower() + c[1:] for c in clauses]
    if len(clauses) == 1:
        text = _PREFIXES[lang][prefix] + clauses[0]
    elif len(clauses) == 2:
        text = _TWO_STEPS[lang].format(a=clauses[0], b=clauses[1])
    else:
        raise ValueError(f"a describing caption covers one or two steps, got {len(steps)}")
    text += _STOP[lang]
    return text[0].upper() + text[1:] if lang == "en" else text
