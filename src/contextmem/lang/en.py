"""English: the tables the summariser, the date reader and the save-claim check read."""

from __future__ import annotations

import re

from .language import DayPhrase, Language, PeriodPhrase, SummaryText

__all__ = [
    "DAY_PHRASES",
    "ENGLISH",
    "MONTHS",
    "NUMBERS",
    "PERIOD_PHRASES",
    "WEEKDAYS",
    "WORD_MONTHS",
    "YESTERDAY",
]

MONTHS = (
    ("January", "Jan"),
    ("February", "Feb"),
    ("March", "Mar"),
    ("April", "Apr"),
    ("May",),
    ("June", "Jun"),
    ("July", "Jul"),
    ("August", "Aug"),
    ("September", "Sept", "Sep"),
    ("October", "Oct"),
    ("November", "Nov"),
    ("December", "Dec"),
)
WORD_MONTHS = frozenset({"May"})
"""Month names that are also everyday words: a date only when capitalised ("PostgreSQL 16 may break")."""
WEEKDAYS = (("Monday",), ("Tuesday",), ("Wednesday",), ("Thursday",), ("Friday",), ("Saturday",), ("Sunday",))
YESTERDAY = ("yesterday", "last night")
ABBREVIATIONS = frozenset(
    {"Dr.", "Mr.", "Mrs.", "Ms.", "Prof.", "St.", "Mt.", "Jr.", "Sr.", "vs.", "e.g.", "i.e.", "a.m.", "p.m."}
)
"""Words that end with a full stop and do not end a sentence. An initial ("J.", "K." in "J.K.") does not
either: a capital alone before a full stop, except "I" ("so did I.")."""
_TIME_WORDS_TEXT = (
    "yesterday today tonight tomorrow ago recently lately weekend weekends week weeks month months year "
    "years days summer winter spring autumn"
)
TIME_WORDS = frozenset(_TIME_WORDS_TEXT.split())
"""Words that say when without a calendar name. Not "day" nor "time": "a great day", "a good time"."""
NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
"""Numbers written as words, one first (the date reader's "three days ago")."""

# The grammar of a day relative to today (memory search's date reader). Words are delimited by "not a
# letter" rather than \b: a CJK character is a \w, and mixed queries ("yesterday发生了什么") are common.
_NOT_LETTER_BEFORE, _NOT_LETTER_AFTER = r"(?<![A-Za-z])", r"(?![A-Za-z])"
_WEEKDAY = "(?P<weekday>" + "|".join(name.lower() for names in WEEKDAYS for name in names) + ")"
# "May" only capitalised: "PostgreSQL 16 may break" is the verb.
_WORD_MONTHS = {name.lower(): name for name in WORD_MONTHS}
_MONTH = (
    "(?P<month>"
    + "|".join(
        f"(?-i:{_WORD_MONTHS[m]})" if m in _WORD_MONTHS else m
        for m in sorted(
            dict.fromkeys(name.lower() for names in MONTHS for name in names), key=len, reverse=True
        )
    )
    + r")\.?"
)
_DAY_OF_MONTH = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
DAY_PHRASES = (
    DayPhrase(r"the\s+day\s+before\s+yesterday", "days", "t", _NOT_LETTER_BEFORE, _NOT_LETTER_AFTER, days=2),
    DayPhrase(
        r"the\s+day\s+after\s+tomorrow", "days_ahead", "t", _NOT_LETTER_BEFORE, _NOT_LETTER_AFTER, days=2
    ),
    DayPhrase("tomorrow", "days_ahead", "t", _NOT_LETTER_BEFORE, _NOT_LETTER_AFTER, days=1),
    DayPhrase(
        rf"(?:next|this\s+coming)\s+{_WEEKDAY}", "next_weekday", "nt", _NOT_LETTER_BEFORE, _NOT_LETTER_AFTER
    ),
    DayPhrase(
        "|".join(w.replace(" ", r"\s+") for w in YESTERDAY),
        "days",
        "yl",
        _NOT_LETTER_BEFORE,
        _NOT_LETTER_AFTER,
        days=1,
    ),
    DayPhrase(
        rf"(?P<n>\d{{1,4}}|{'|'.join(NUMBERS)})\s+days?\s+ago",
        "days_ago",
        r"\dotfsen",
        r"(?<![\w.])",
        _NOT_LETTER_AFTER,
    ),
    DayPhrase(
        rf"(?:last|this\s+past)\s+{_WEEKDAY}", "last_weekday", "lt", _NOT_LETTER_BEFORE, _NOT_LETTER_AFTER
    ),
    DayPhrase(rf"on\s+{_WEEKDAY}", "last_weekday", "o", _NOT_LETTER_BEFORE, _NOT_LETTER_AFTER, certain=False),
    DayPhrase(r"(?P<week>last)\s+weekend", "weekend", "l", _NOT_LETTER_BEFORE, _NOT_LETTER_AFTER),
    # "the last week" and "the past week" are a rolling window, not the previous calendar week.
    DayPhrase(
        r"(?P<week>last)\s+week", "whole_week", "l", r"(?<![A-Za-z])(?<!the\s)(?<!past\s)", _NOT_LETTER_AFTER
    ),
    DayPhrase(
        rf"{_MONTH}\s+{_DAY_OF_MONTH}(?:,?\s+(?P<year>\d{{4}}))?",
        "month_day",
        "jfmasond",
        _NOT_LETTER_BEFORE,
        r"(?![\d:.]*\d)(?![A-Za-z])",
    ),
    DayPhrase(
        rf"{_DAY_OF_MONTH}\s+(?:of\s+)?{_MONTH}(?:,?\s+(?P<year>\d{{4}}))?",
        "month_day",
        r"\d",
        r"(?<![\w.:])",
        r"(?!\d)(?![A-Za-z])",
    ),
)
"""The days memory search reads relative to today: "yesterday", "last night" (today - 1); "the day
before yesterday" (- 2); "3 days ago", "three days ago"; "last Saturday", "this past Saturday", "on
Saturday" (the most recent one; a memory note leaves "on Saturday" alone, which may be the next one);
"last week", "last weekend" (the previous ISO week); "March 14", "14th of March" (a year may follow). Only
a memory note reads the days after today: "tomorrow" (+ 1), "the day after tomorrow" (+ 2), "next
Saturday", "this coming Saturday" (the first one after today). Left alone: "today", "this Friday", "every
Monday", "Mondays", a bare weekday, "the last week" (a rolling window), "a week ago", "next week", "may"
(the month only as "May"), "march on", "second", "sat"."""

_NOT_THE = r"(?<![A-Za-z])(?<!the\s)"  # "over the last month", "in the next year": a rolling window
PERIOD_PHRASES = (
    PeriodPhrase(rf"{_NOT_THE}last\s+month{_NOT_LETTER_AFTER}", "month", -1),
    PeriodPhrase(rf"{_NOT_THE}next\s+month{_NOT_LETTER_AFTER}", "month", 1),
    PeriodPhrase(rf"{_NOT_THE}last\s+year{_NOT_LETTER_AFTER}", "year", -1),
    PeriodPhrase(rf"{_NOT_THE}next\s+year{_NOT_LETTER_AFTER}", "year", 1),
)
"""The months and years a memory note writes out: "last month", "next month", "last year", "next year".
Left alone: "the last month", "the next year" (rolling windows), "this month", "a year ago"."""


CUES = {
    "constraint": (
        r"must|mustn't|should|shouldn't|don't|do not|never|always|only|without|need to|needs to|have to|"
        r"required?|avoid|make sure|ensure|cannot|can't|no more than|at most|at least"
    ),
    "progress": (
        r"done|fixed|completed?|implemented|added|created|updated|resolved|passe[sd]|passing|works now|"
        r"merged|deployed|finished|wrote|written|removed|refactored|migrated|installed|succeeded"
    ),
    "decision": (
        r"decided?|decision|chose|choose|chosen|we will|we'll|going with|go with|opted|instead of|"
        r"agreed|let's use|settled on"
    ),
    "plan": (
        r"todo|next step|next week|next month|next year|next time|tomorrow|remaining|still need|will need|"
        r"plan to|planning|going to|gonna|I will|I'll|we're going|follow-up|afterwards|later this|"
        r"sign(?:ed)? up|booked|scheduled|can't wait|looking forward"
    ),
    "preference": (
        r"I (?:really )?(?:like|love|adore|enjoy|prefer|hate|can't stand)|favou?rite|prefer|into|"
        r"obsessed with|fan of|go-to|comfort food"
    ),
    "error": r"error|exception|traceback|failed|failure|fatal|panic|denied|refused|timed out|killed",
    "noted": (
        r"for the record|note that|please note|notes?:|N\.?B\.?:?|FYI|keep in mind|please remember|"
        r"don't forget|heads[- ]up|important:|worth noting"
    ),
    "request": r"please|can you|could you|would you|help me|I want you|I need you|let's|find out|make it",
    "command": (
        r"^(?:check|pull|grep|run|show|look|open|list|find|fix|write|read|tag|set|try|add|remove|delete|update|"
        r"deploy|push|restart|test|build|summari[sz]e|tell|give|explain|describe|compare|see|get|fetch|print|send)"
        r"(?: (?:the|a|an|my|our|your|it|this|that|these|those|me|us|them|all|out|up|again|at|for|through)\b|"
        r"[.!]?$)"
    ),
    # I / we / my X / our X, or a subject the speaker shares as English speakers write one ("Jimmy and I",
    # "my dad and I": 72 and 26 of LoCoMo's 3,802 dev turns, 7 of MADial-Bench's 773 English user lines;
    # "me and my cousin", casual speech: 3 LoCoMo dev turns), then a past-tense verb (a word between at
    # most: "I just got"); or how the speaker felt at something ("I was thrilled to see"). Not "I and X",
    # which neither corpus has (0 turns): only our MADial generator wrote it. The "X and I" name is Latin
    # letters, so a long run of CJK characters (which are ``\w``) costs one pass, not one per character.
    "event": (
        r"(?:me and (?:\w+ ){0,3}\w+|(?:my )?[A-Za-z]+ and I|I|we|my \w+|our \w+) "
        r"(?:\w+ )?(?:\w+ed|went|got|bought|made|took|won|lost|met|saw|ran|began|"
        r"started|moved|adopted|finished|visited|joined|left|became|found|had|gave|built|wrote|read|flew|drove|"
        r"rode|ate|drank|swam|sang|caught|taught|brought|spent|sent|heard|told|sold|kept|slept|fell|held|threw|"
        r"broke|chose|spoke|forgot|paid|wore|grew|drew|hid|fed|dug|sat|stood)"
        r"|I (?:was|felt) (?:\w+ )?\w+ (?:to \w+|\w+ing|at|when|after|because|about)"
    ),
    "advice": (
        r"you (?:can|could|should|might|may want to) (?:try|consider|ask|talk to|find|think about|look for)|"
        r"(?:maybe|perhaps) you|why don't you|how about you|don't worry"
    ),
}

_NOT_NAMES_TEXT = (
    "I I'm I've I'll I'd Im Ive A An The This That These Those It It's Its He She We They You Your My Our "
    "Their His Her Me Us Him Them What When Where Why How Who Which Whose If So But And Or Also Then Yes No "
    "Yeah Yep Nope Not Oh Ah Wow Haha Hah Lol Omg OMG Ok Okay OK Hey Hi Hello Thanks Thank Sure Well Great "
    "Good Nice Cool Awesome Amazing Love Sorry Please Just Really Honestly Actually Anyway Maybe Perhaps "
    "Definitely Absolutely Totally Congrats Congratulations Aww Ugh Hmm Speaking By For From In On At To "
    "With Without After Before Since Until As Do Does Did Is Are Was Were Be Been Have Has Had Can Could "
    "Would Should Will Shall May Might Must Let Let's Here There Now Today Tomorrow Yesterday Tonight Once "
    "All Some Any Every Each Both Either Neither Lately Recently Finally Still Even Only Long Happy Merry "
    "Good Morning Afternoon Evening Night Bye Take See Talk Catch Speak Gotta Mondays Fridays Ha Classic "
    "Aw Mm Hm Guess Next Last First Of Your Tell That's There's What's Don't Didn't Can't Won't Isn't "
    "NOTE Note NB FYI TODO Important IMPORTANT Warning WARNING Something Someone Somebody Anything Anyone "
    "Everything Everyone Everybody Nothing Nobody None"
)
NOT_NAMES = frozenset(_NOT_NAMES_TEXT.split())

_STOP_WORDS_TEXT = (
    "a an the and or but if then so to of in on at for with from by about as into over under after before "
    "i me my mine we us our you your he him his she her they them their it its this that these those is am "
    "are was were be been being have has had do does did can could would should will shall may might must "
    "not no yes yeah oh wow haha lol just really so very too also even still already quite pretty kind sort "
    "like get got go going went come came make made take took know think thought feel felt want wanted "
    "say said tell told thing things stuff lot lots way much many more most some any all every one ones "
    "what when where why how who which there here now then today time good great nice cool awesome amazing "
    "love sure okay ok thanks thank please hey hi hello well honestly actually anyway maybe i'm i've i'll "
    "it's that's you're don't didn't can't won't isn't doesn't let's what's there's he's she's we're "
    "they're been day days week weeks"
)
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())

FILLERS = (
    # Interjections and openers ("oh": 29 of LoCoMo's 3,802 dev turns open with it, "by the way" is in 54).
    r"^(?:(?:oh|ah|aw+|wow|whoa|haha+|hah|lol|omg|well|so|hey|hi|hmm+|um+|uh+|ok(?:ay)?|yeah|yep|honestly|"
    r"actually|anyway|by the way|btw|ugh|gosh|aww)\b(?![:：])[\s,!.…~-]*)+",
    # A lead-in that announces news says nothing itself: "Guess what? ...". Each is common in English
    # chat: "guess what" (14 of LoCoMo's 3,802 dev turns), "you know what?" (MADial-Bench's English user
    # lines), "fun fact:", "just wanted to let you know" (chat and app text in public GitHub repositories),
    # "I have to tell you", "there's something I wanted to tell you" (dialogue in public game scripts).
    # Without "there's", "something I wanted to tell you:" was our MADial generator's one lead-in only.
    r"^(?:guess what|you know what|fun fact|there's something I (?:wanted|want|have) to tell you|"
    r"I (?:just )?(?:wanted|have|had|need) to (?:tell|let) you(?: know)?|"
    r"just wanted to (?:let you know|share|tell you))\s*[,:!?.…-]+\s*",
    # A greeting only when punctuation closes it: "Morning meetings start at 9" keeps its first word.
    r"^(?:(?:good )?(?:morning|afternoon|evening)|hello|hi there|hey there|greetings)"
    r"(?:[\s,]+(?:all|everyone|team|folks))?\s*[,!.…~]+\s*",
)

LOG_CUES = (
    # Log levels as Python's logging, log4j / logback, java.util.logging (SEVERE), journald and
    # PostgreSQL (FATAL, PANIC) print them.
    r"ERROR\b|FATAL\b|CRITICAL\b|SEVERE\b|PANIC\b",
    # What compilers and command-line tools print before a failure: gcc / clang "error:", rustc
    # "error[E0308]:", pip "ERROR:", git "fatal:", make "*** [all] Error 2", npm "npm ERR!".
    r"error\b|fatal\b|Fatal\b|ERR!",
    # Exception names at the end of a Python, Java, JavaScript or C# traceback ("ValueError:",
    # "java.lang.NullPointerException", node's "Error:"), and the lines that open or chain one.
    r"Error\b|Exception\b|Traceback \(most recent call last\)|Caused by:",
    # Go "panic: runtime error", Rust "thread 'main' panicked at".
    r"panic:|panicked",
    # Test runners: pytest "FAILED", go test "--- FAIL:", Maven "BUILD FAILURE", "Tests failed".
    r"FAIL\b|FAILED\b|FAILURE\b|Failed\b|failed\b|Failure\b|failure\b",
    # A killed process: Kubernetes "OOMKilled" and "CrashLoopBackOff", the kernel's "Out of memory:
    # Killed process" and "oom-kill", a shell's "Killed" and "Segmentation fault (core dumped)".
    r"OOMKilled|CrashLoopBackOff|Out of memory|out of memory|oom-kill|Killed\b|Segmentation fault|"
    r"segfault|core dumped",
    # The C library's messages for a failed call, as shells and most tools print them (strerror).
    r"Permission denied|No such file or directory|Connection refused|Cannot allocate memory",
    # The linker's "undefined reference to"; a command's status: "exit code 1", "exit status 2",
    # Python's "returned non-zero exit status 1".
    r"undefined reference to|exit code [1-9]|exit status [1-9]|non-zero exit",
)

ENGLISH = Language(
    code="en",
    cues=CUES,
    log_cues=LOG_CUES,
    whole_words=True,
    stop_words=STOP_WORDS,
    not_names=NOT_NAMES,
    fillers=FILLERS,
    # The spaces before a laugh go with it, from the first of them only: a long run of spaces is not
    # scanned again from each one.
    laughter=r"(?<!\s)\s*\b(?:haha+|hahaha|lol|lmao)\b[!.]*",
    months=MONTHS,
    weekdays=WEEKDAYS,
    day_phrases=DAY_PHRASES,
    number_words={word: value for value, word in enumerate(NUMBERS, start=1)},
    weeks_back={"last": 1},
    period_phrases=PERIOD_PHRASES,
    month_spelling="{month} {y}",
    written_months=(rf"(?<![A-Za-z]){_MONTH},?\s+(?P<year>\d{{4}})(?![\d:])",),
    date_spellings=(r"{d}(?:st|nd|rd|th)? {month},? {y}", r"{month} {d}(?:st|nd|rd|th)?,? {y}"),
    partial_dates=(r"\b\d{1,2}(?:st|nd|rd|th)\b",),
    time_words=TIME_WORDS,
    when_questions=(
        r"^\W*(?:when|since when|how long ago|what (?:date|day|year|month|time)|(?:in |on )?which (?:date|day"
        r"|year|month))\b",
    ),
    # Not after an abbreviation or an initial: "Dr. Dre", "J.K. Rowling" are one sentence's words.
    sentence_end=r"(?<=[.!?;…])"
    + "".join(rf"(?<!\b{re.escape(word)})" for word in sorted(ABBREVIATIONS))
    + r"(?<!\W[A-HJ-Z]\.)(?<!^[A-HJ-Z]\.)\s+(?=\S)",
    clause_end=r"[,;]\s+",  # before a space: "1,200" is a number
    question_mark="?",
    sentence_marks=".!?…",
    clause_marks=",;",
    full_stop=".",
    # Its words are bounded, so a run of "A.A.A.…" is not scanned again from every letter.
    speaker_name=r"[A-Z][\w.'’-]{0,31}(?: [A-Z][\w.'’-]{0,31}){0,2}",
    header_words=frozenset(
        {"session", "date", "day", "time", "on", "at", "am", "pm", "chat", "conversation", "part", "of"}
    ),
    save_claim=re.compile(
        r"\b(?:saved|stored|recorded|written|wrote|added|noted|committed)\b[^.!?\n]{0,60}"
        r"\b(?:memory|memories)\b"
        r"|\bi(?:'ll|\s+will|\s+shall)\s+(?:always\s+)?remember\b"
        r"|\bi\s+(?:now\s+)?remember\s+that\s+your\b",
        re.IGNORECASE,
    ),
    not_saved_note="(not saved: no memory_write call was made)",
    letters="A-Za-z",
    summary=SummaryText(
        sections={
            "goal": "Goal",
            "constraints": "Constraints",
            "progress": "Progress",
            "decisions": "Key decisions",
            "next": "Next steps",
            "context": "Critical context",
        },
        hints={
            "goal": "what the user wants to achieve",
            "constraints": "requirements, limits and things not to do",
            "progress": "what has been done and found, with outcomes",
            "decisions": "choices made and why",
            "next": "what remains to do",
            "context": "exact errors, paths, values and facts needed to resume",
        },
        hint=" ({})",
        none="(none)",
        none_items=frozenset({"(none)", "none", "n/a"}),
        none_replies=frozenset({"none."}),
        label_sep=": ",
        joiner=" ",
        earlier="Earlier: ",
        system="""You maintain the running memory of a long conversation between a user and an AI assistant. \
You never talk to the user; you only write the memory document.

You get the new part of the conversation, the identifiers recorded so far, and a draft of the new memory \
made automatically from the earlier memory and the new part. Correct the draft:
- Drop draft items the new part makes outdated (a value that changed, a plan done or cancelled): keep \
only the newest statement.
- Merge draft items that say the same thing into one.
- Add what matters in the new part that the draft missed: decisions, outcomes, preferences, plans.
- Shorten wordy items, but copy names, numbers, dates, file paths, identifiers and error messages exactly \
as written, character for character.
- Keep every other item of the draft.
- Write in English, tersely, as bullet points under the six headers of the template, in its order.
- Output only the filled-in template: no greeting, no preface, no closing remark. \
Stay under {budget} tokens.""",
        prompt_labels={
            "new": "New part of the conversation:",
            "ledger": "Identifiers recorded so far (kept separately; copy them exactly when you use them):",
            "draft": "Draft of the new memory (one fact a line, with its section):",
            "empty": "(empty)",
            "extra": "Additional instruction from the user for this summary:",
            "fill": "Now write the corrected memory. Fill in this template, replacing each ... with bullet "
            "points from the draft, corrected with the new part of the conversation; write every one of the "
            "six sections:",
        },
        title="Summary of the earlier conversation:",
        archive="Archive of the summarised messages (read the full text with read_file(path)):",
        ledger_title="Identifiers (verbatim):",
        ledger_labels={
            "path": "paths",
            "url": "urls",
            "host": "hosts",
            "email": "emails",
            "error": "errors",
            "id": "ids",
            "number": "numbers",
            "name": "names",
        },
        error_words="exit code|status code",
        units="ms|µs|ns|s|sec|min|h|%|px|rps|qps|tokens?",
        chatty="sure|certainly|of course|okay|ok|absolutely|here is|here's|hello|hi|hey|greetings|"
        "i'd be happy|i can help|as an ai",
        closer="let me know|hope this helps|feel free|if you need",
    ),
)
