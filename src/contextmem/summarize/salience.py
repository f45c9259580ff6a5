"""What makes a sentence worth keeping (issue 17): the things people later ask about.

Pure functions over text, English and Chinese alike. A message is split into sentences; each sentence is
lightly compressed (leading interjections and laughter stripped, and later clauses that say nothing the
rest of the conversation does not — never reworded) and scored by the kinds of content questions ask
for: names (capitalised words that are not sentence furniture, quoted titles, 《书名》), numbers, dates,
identifiers (``OPS-4791``), preferences ("I like / my favourite", 喜欢), commitments and plans ("I will",
"next week", 打算, 计划), decisions, outcomes and errors, what someone marks as worth remembering ("for the
record", ``NOTE:``, 顺便记一下), and words that are rare in the conversation (chit-chat repeats itself; a
fact names something once). The section a sentence belongs in (Goal, Constraints, Progress, Key
decisions, Next steps, Critical context) is picked by cue words.

Also here: who said a message (a ``Name:`` prefix, as multi-party transcripts write it) and which date a
session is on (a short header line holding a full date), so facts can be attributed and anchored.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence

__all__ = [
    "compress",
    "content_tokens",
    "cue",
    "header_date",
    "names_something",
    "rarity",
    "salience",
    "section_of",
    "sentences",
    "speaker_prefix",
    "speakers_of",
    "trim_clauses",
]


def cue(english: str, chinese: str) -> re.Pattern[str]:
    """One pattern: English alternatives as whole words (case-insensitive), Chinese ones anywhere."""
    return re.compile(rf"(?i)(?<![A-Za-z])(?:{english})(?![A-Za-z])|{chinese}")


CONSTRAINT = cue(
    r"must|mustn't|should|shouldn't|don't|do not|never|always|only|without|need to|needs to|have to|"
    r"required?|avoid|make sure|ensure|cannot|can't|no more than|at most|at least",
    r"不要|必须|需要|只能|禁止|不能|务必|应该|别|不得|至少|最多|确保|一定要|不允许",
)
PROGRESS = cue(
    r"done|fixed|completed?|implemented|added|created|updated|resolved|passe[sd]|passing|works now|"
    r"merged|deployed|finished|wrote|written|removed|refactored|migrated|installed|succeeded",
    r"完成|修复|已经|实现了|添加了|通过|解决|部署了|更新了|创建了|删除了|改好",
)
DECISION = cue(
    r"decided?|decision|chose|choose|chosen|we will|we'll|going with|go with|opted|instead of|"
    r"agreed|let's use|settled on",
    r"决定|选择|采用|改用|我们将|确定|就用|方案",
)
PLAN = cue(
    r"todo|next step|next week|next month|next year|next time|tomorrow|remaining|still need|will need|"
    r"plan to|planning|going to|gonna|I will|I'll|we're going|follow-up|afterwards|later this|"
    r"sign(?:ed)? up|booked|scheduled|can't wait|looking forward",
    r"接下来|下一步|待办|还需要|计划|打算|准备|之后|稍后|下周|下个月|明天|明年|报名|预约|订好",
)
PREFERENCE = cue(
    r"I (?:really )?(?:like|love|adore|enjoy|prefer|hate|can't stand)|favou?rite|prefer|into|"
    r"obsessed with|fan of|go-to|comfort food",
    r"喜欢|最爱|偏爱|讨厌|爱吃|爱看|迷上|更喜欢|最喜欢|不喜欢",
)
ERROR = cue(
    r"error|exception|traceback|failed|failure|fatal|panic|denied|refused|timed out|killed",
    r"错误|失败|异常|报错|超时|拒绝",
)
NOTED = cue(
    r"for the record|note that|please note|notes?:|N\.?B\.?:?|FYI|keep in mind|please remember|don't forget|"
    r"heads[- ]up|important:|worth noting",
    r"记一下|记住|注意[：:]|备注|提醒一下|别忘了|重要[：:]",
)
"""Someone marks what follows as worth remembering: "For the record: ...", "NOTE:", 顺便记一下."""
REQUEST = cue(
    r"please|can you|could you|would you|help me|I want you|I need you|let's|find out|make it",
    r"请|帮我|帮忙|能不能|麻烦|你来",
)
COMMAND = cue(
    r"^(?:check|pull|grep|run|show|look|open|list|find|fix|write|read|tag|set|try|add|remove|delete|update|"
    r"deploy|push|restart|test|build|summari[sz]e|tell|give|explain|describe|compare|see|get|fetch|print|send)"
    r"(?: (?:the|a|an|my|our|your|it|this|that|these|those|me|us|them|all|out|up|again|at|for|through)\b|"
    r"[.!]?$)",
    r"^(?:看|查|跑|试|测|找|改)一下|^(?:看看|查查|把)|^(?:检查|确认|总结)(?![了过完：:])",
)
"""A sentence that opens with an instruction to the agent: "Check the dry-run output.", "Try again.",
看一下部署配置 — the verb, then what it acts on; not "Fix is deployed", "Update: …", 确认了, 总结：…"""
# An event told in the first person: I / we / my X / our X, or a subject the speaker shares ("Jimmy and
# I", "my dad and I", "me and my cousin Oliver"), then a past-tense verb (a word between at most: "I just
# got"); or how the speaker felt at something ("I was thrilled to see", "I felt nervous playing", "I was
# late to"). Chinese marks no tense: a completed action (了, but not after a verb of knowing, 我明白了, or
# a degree, 太好看了), one of the verbs that tell one, a sentence that opens "I with / at / went to / took
# part in / because / from" (我和…, 我在…, 我们去…, 我参加…, 我因为…, 我从…), something done for the speaker
# (妈妈送给我…, 爷爷教我…) or what made the speaker feel (…让我感到难过). The "X and I" name is Latin
# letters, so a long run of CJK characters (which are ``\w``) costs one pass, not one per character.
EVENT = cue(
    r"(?:(?:I|we|me) and (?:\w+ ){0,3}\w+|(?:my )?[A-Za-z]+ and I|I|we|my \w+|our \w+) "
    r"(?:\w+ )?(?:\w+ed|went|got|bought|made|took|won|lost|met|saw|ran|began|"
    r"started|moved|adopted|finished|visited|joined|left|became|found|had|gave|built|wrote|read|flew|drove|"
    r"rode|ate|drank|swam|sang|caught|taught|brought|spent|sent|heard|told|sold|kept|slept|fell|held|threw|"
    r"broke|chose|spoke|forgot|paid|wore|grew|drew|hid|fed|dug|sat|stood)"
    r"|I (?:was|felt) (?:\w+ )?\w+ (?:to \w+|\w+ing|at|when|after|because|about)",
    r"^我们?(?:和|跟|与|在|去|到|参加|因为|从)|我们?[^，。！？,!?]{0,12}(?<!明白|知道|想好|记住|记得|不懂|懂得|决定)(?<![太真好]\w)了"
    r"|去了|买了|拿到|领养|搬到|参加了|认识了|获得|得到|赢了|收到|送了?给?我|教我|奖励了?我|带我去|让我(?:感到|觉得)",
)
EVENT_WEIGHT = 3.0
"""What an event told in the first person adds ("I went to a support group", "my sister adopted a cat",
我们参加了运动会, 我和爸爸去游泳), as much as a mark that something is worth remembering: later questions
ask what people did. At 1.0 such a sentence, made of everyday words (happy, park, friends), lost to
remarks and advice holding a rare or capitalised word; at 3.0 (with the Chinese ``我在/我和…`` opening)
the MADial-derived dev set kept 54.4% of its answers, not 42.6%, its held-out draw 54.4%, not 45.8%, the
synthetic sets one answer fewer and as many (``evals/results/compaction_facts.md``)."""

ADVICE = cue(
    r"you (?:can|could|should|might|may want to) (?:try|consider|ask|talk to|find|think about|look for)|"
    r"(?:maybe|perhaps) you|why don't you|how about you|don't worry",
    r"你可以试|你可以尝试|可以试着|或许你|也许你|你不妨|不妨试|试着|别担心|不要担心",
)
"""Advice to the listener ("you could try ...", 你可以试着): what a later question asks about is what
people did and said of themselves, rarely the advice they got."""

_MONTHS = (
    r"Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
    r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
)
_DAYS = r"Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
DATE = re.compile(
    rf"\b\d{{4}}[-/.]\d{{1,2}}[-/.]\d{{1,2}}(?:[ T]\d{{1,2}}:\d{{2}})?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)? (?:{_MONTHS}),? \d{{4}}\b"
    rf"|\b(?:{_MONTHS}) \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}\b"
    r"|\d{4}年\d{1,2}月\d{1,2}日"
)
_PARTIAL_DATE = re.compile(
    rf"\b(?:{_MONTHS}|{_DAYS})\b|\b\d{{1,2}}(?:st|nd|rd|th)\b|\d{{1,2}}月\d{{1,2}}[日号]|[上下这本]周[一二三四五六日天]"
    r"|[一二三四五六七八九十]{1,2}月|\d{1,2}月|今年|去年|明年|昨天|前天|周末"
)
_NUMBER = re.compile(
    r"\d+(?:[.,:]\d+)*%?|[一二两三四五六七八九十百千万]+(?:个|岁|公里|次|元|块|年|天|楼|本|只|张)"
)
QUOTED = re.compile(r"《[^》]{1,30}》|“[^”]{1,40}”|\"[^\"]{2,40}\"|「[^」]{1,30}」")
# An identifier inside a sentence: letters and digits joined by - _ / . or : (kestrel-4, OPS-4791,
# ff_split_refunds_v6, s3://pay-audit-274); a plain word or number is not one.
_IDENTIFIER = re.compile(
    r"(?<![\w/.:-])(?=[\w/.:-]*\d)(?=[\w/.:-]*[A-Za-z]{2})[A-Za-z0-9]+(?:[-_/.:]+[A-Za-z0-9]+)+"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")

# Words that start sentences or fill them: capitalised, but not names.
_COMMON_CAPS_WORDS = (
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
_COMMON_CAPS = frozenset(_COMMON_CAPS_WORDS.split())
_STOP_WORDS = (
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
_STOP = frozenset(_STOP_WORDS.split())
_FILLER_HEAD = re.compile(
    r"^(?:(?:oh|ah|aw+|wow|whoa|haha+|hah|lol|omg|well|so|hey|hi|hmm+|um+|uh+|ok(?:ay)?|yeah|yep|honestly|"
    r"actually|anyway|by the way|btw|ugh|gosh|aww)\b(?![:：])[\s,!.…~-]*)+"
    r"|^(?:哈哈+|嗯+|啊+|哇+|哦+|噢+|唉+|对了|话说|其实|说实话|好吧)[，,！!。…~\s]*"
    # A lead-in that announces news says nothing itself: "Guess what? ...", "跟你说件事：..."
    r"|^(?:guess what|you know what|fun fact|(?:there's )?something I (?:wanted|want|have) to tell you|"
    r"I (?:just )?(?:wanted|have|had|need) to (?:tell|let) you(?: know)?|"
    r"just wanted to (?:let you know|share|tell you))\s*[,:!?.…-]+\s*"
    r"|^(?:跟你说件事|告诉你一件事|告诉你个好消息|跟你说|你知道吗|猜猜怎么着|说件事)[，,：:！!？?。…~\s]+"
    # A greeting only when punctuation closes it: "Morning meetings start at 9" keeps its first word.
    r"|^(?:(?:good )?(?:morning|afternoon|evening)|hello|hi there|hey there|greetings)"
    r"(?:[\s,]+(?:all|everyone|team|folks))?\s*[,!.…~]+\s*"
    r"|^(?:早上好|早安|上午好|下午好|晚上好|你好|您好|大家好)[，,！!。…~\s]*"
    r"|^(?:哈喽|哈啰|嗨)+(?:[，,！!。…~\s]+|$)",  # 嗨皮 ("happy") is no greeting
    re.I,
)
# The spaces before a laugh go with it, from the first of them only: a long run of spaces is not scanned
# again from each one.
_FILLER_ANY = re.compile(
    r"(?<!\s)\s*\b(?:haha+|hahaha|lol|lmao)\b[!.]*|(?<![\s,，])[\s,，]*哈哈+[！!。]*", re.I
)
_EMOJI = re.compile(r"[\U0001F300-\U0001FAFF\u2600-\u27BF]+|:\)|:\(|:D|;\)")
_SENTENCE_END = re.compile(r"(?<=[.!?;…])\s+(?=\S)|(?<=[。！？；])")
SPEAKER_NAME = r"[A-Z][\w.'’-]{0,31}(?: [A-Z][\w.'’-]{0,31}){0,2}|[\u4e00-\u9fff]{1,4}"
"""A speaker's name before ``:`` ("Caroline", "Dr. Mei Lin", 王磊); its words are bounded, so a run of
"A.A.A.…" is not scanned again from every letter."""
_SPEAKER = re.compile(rf"^\s*(?P<who>{SPEAKER_NAME})[:：][ \t]*")


def speaker_prefix(text: str, speakers: Collection[str] | None = None) -> tuple[str | None, str]:
    """``("Caroline", rest)`` when ``text`` starts with a ``Caroline: `` prefix (and ``Caroline`` is one
    of ``speakers``, when given), else ``(None, text)``."""
    m = _SPEAKER.match(text)
    if m is None or m["who"] in _COMMON_CAPS or (speakers is not None and m["who"] not in speakers):
        return None, text
    return m["who"], text[m.end() :]


def speakers_of(texts: Iterable[str]) -> frozenset[str]:
    """The names that prefix at least two of ``texts``: speakers, not a ``Fixed:`` or ``Note:`` label."""
    counts = Counter(who for who, _ in map(speaker_prefix, texts) if who is not None)
    return frozenset(who for who, n in counts.items() if n >= 2)


_LABEL = re.compile(r"^[^\s:：\[]{1,20}[:：]\s*")
_HEADER_WORDS = frozenset(
    {"session", "date", "day", "time", "on", "at", "am", "pm", "chat", "conversation", "part", "of"}
)


def header_date(line: str) -> str | None:
    """The date of a session header line (``[Session 3 · 8 May 2023]``, ``2023-05-08 10:00``,
    ``DATE: 1:56 pm on 8 May, 2023``, ``2023年5月8日``): a short line holding a full date and no word but
    header words (session, date, day, time, ...) and numbers."""
    stripped = _LABEL.sub("", line.strip(), count=1)  # "A: [Session 4 · …]", "DATE: …"
    if len(stripped) > 80:
        return None
    m = DATE.search(stripped)
    if m is None:
        return None
    rest = [
        w
        for w in _WORD.findall(stripped[: m.start()] + stripped[m.end() :])
        if w.lower() not in _HEADER_WORDS and not w.isdigit()
    ]
    return m.group(0) if not rest else None  # "The release train leaves on 2026-12-03" is a fact


def compress(sentence: str) -> str:
    """``sentence`` without leading interjections, laughter or emoji; the words that are kept are the
    sentence's own, in its order."""
    text = _EMOJI.sub("", sentence)
    text = _FILLER_ANY.sub("", text)
    for _ in range(3):  # "Oh, guess what? ...": one lead-in after another
        text, n = _FILLER_HEAD.subn("", text.strip(" \t\n,，~"))
        if not n:
            break
    text = text.strip(" ,，~")
    if text and text[0].islower() and sentence[:1].isupper():
        text = text[0].upper() + text[1:]
    return text


# Where a clause ends: a Chinese comma or semicolon, or an English one before a space ("1,200" is a number).
_CLAUSE_END = re.compile(r"[，；]\s*|[,;]\s+")


def names_something(text: str, *, first_word: bool = True) -> bool:
    """Whether ``text`` names something a question could ask for: a name, number, date or day, quoted title
    or identifier. ``first_word=False``: a capitalised first word is not taken for a name (every English
    sentence has one; so "Priya owns the rollback" names nothing that way)."""
    if not first_word:
        text = _FIRST_WORD.sub("", text, count=1)
    return bool(
        _names(text)
        or _NUMBER.search(text)
        or DATE.search(text)
        or _PARTIAL_DATE.search(text)
        or QUOTED.search(text)
        or _IDENTIFIER.search(text)
    )


_FIRST_WORD = re.compile(r"^[^\w]*[A-Z][\w'’-]*")


def trim_clauses(sentence: str, rare: dict[str, float]) -> str:
    """``sentence`` without the later clauses that say nothing the rest of the conversation does not
    (", and I felt very happy", "，感到非常开心", ", wish me luck"): every content word of such a clause
    occurs in another sentence of ``rare``'s corpus (:func:`rarity`), and it names nothing — no name,
    number, date or day, quoted title or identifier. The first clause always stays; what is kept is the
    sentence's own text, in its order, and it ends the way the sentence did."""
    cuts = [0, *(m.end() for m in _CLAUSE_END.finditer(sentence)), len(sentence)]
    clauses = [sentence[a:b] for a, b in itertools.pairwise(cuts) if a < b]
    kept = clauses[:1] + [
        c
        for c in clauses[1:]
        if names_something(c)
        or any(rare.get(t, 1.0) >= 1.0 for t in content_tokens(c))  # a word no other sentence uses
    ]
    if len(kept) == len(clauses):
        return sentence
    text = "".join(kept).rstrip()
    if text[-1] in "，,；;":
        end = sentence.rstrip()[-1]
        text = text[:-1] + (end if end in "。！？.!?…" else "。" if text[-1] in "，；" else ".")
    return text


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, line by line, bullets and markdown marks stripped."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.strip().lstrip("-*•>#").strip()
        if line:
            out.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return out


def content_tokens(text: str) -> list[str]:
    """Lower-cased content words (English, stop words dropped) and character bigrams (Chinese)."""
    words = [w.lower().strip("'’") for w in _WORD.findall(text)]
    tokens = [w for w in words if (len(w) > 2 and w not in _STOP) or w.isdigit()]
    for run in _CJK_RUN.findall(text):
        tokens.extend(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return tokens


def rarity(corpus: Iterable[str]) -> dict[str, float]:
    """Per content token, how rare it is across ``corpus`` (sentences): ``1 / sqrt(document frequency)``."""
    df: Counter[str] = Counter()
    for text in corpus:
        df.update(set(content_tokens(text)))
    return {token: 1 / math.sqrt(n) for token, n in df.items()}


def _names(text: str) -> int:
    """Capitalised words that are not sentence furniture (``Caroline``, ``LGBTQ``, ``Lisbon``)."""
    return sum(1 for w in _WORD.findall(text) if w[0].isupper() and len(w) > 1 and w not in _COMMON_CAPS)


def salience(sentence: str, rare: dict[str, float], *, identifiers: Sequence[str] = ()) -> float:
    """How likely a later question asks for what ``sentence`` says (0 for chit-chat; higher is better).

    The sum of: names and quoted titles, numbers, dates, a preference, a plan or commitment, a decision,
    an event told in the first person, an error, a mark that it is worth remembering ("for the record",
    ``NOTE:``, 记一下), identifiers written in it (``kestrel-4``) and the ledger's ``identifiers`` it
    holds, and the rarity of its content words (``rare``, from :func:`rarity`; numbers count as numbers
    only); a question, advice to the listener (:data:`ADVICE`) or a sentence with almost no content counts
    for less.
    """
    tokens = content_tokens(sentence)
    if not tokens:
        return 0.0
    # Numbers count once, as numbers, not again as rare words: a log line's ids and timestamps are all
    # rare, and would outscore every sentence a person wrote.
    score = math.fsum(rare.get(t, 1.0) for t in set(tokens) if not t.isdigit()) ** 0.8
    score += 1.5 * min(3, _names(sentence)) + 1.5 * min(2, len(QUOTED.findall(sentence)))
    score += 1.0 * min(3, len(_NUMBER.findall(sentence)))
    score += 2.0 * bool(DATE.search(sentence)) + 1.0 * bool(_PARTIAL_DATE.search(sentence))
    score += 2.0 * bool(PREFERENCE.search(sentence)) + 1.5 * bool(PLAN.search(sentence))
    score += 1.5 * bool(DECISION.search(sentence)) + EVENT_WEIGHT * bool(EVENT.search(sentence))
    score += 2.0 * bool(ERROR.search(sentence)) + 3.0 * bool(NOTED.search(sentence))
    score += 1.5 * min(2, len(_IDENTIFIER.findall(sentence)))
    score += 2.0 * min(3, sum(1 for i in identifiers if i in sentence))
    if sentence.rstrip().endswith(("?", "？")):
        score *= 0.5
    if ADVICE.search(sentence):
        score *= 0.5
    if len(tokens) < 3:
        score *= 0.5
    return float(score)


def only_instructs(sentence: str) -> bool:
    """Whether a user's sentence only tells the agent what to do ("Check the dry-run output.",
    看一下部署配置里的资源限制, 请记下来) and names nothing: what it asked for is in the reply,
    so the summary keeps the reply's facts, not the asking. (A question stays until it is answered:
    ``facts._answered``.)"""
    return bool(REQUEST.search(sentence) or COMMAND.search(sentence)) and not names_something(
        sentence, first_word=False
    )


def section_of(sentence: str, *, from_user: bool) -> str:
    """The summary section a sentence belongs in, by cue words; facts without a cue are context."""
    if ERROR.search(sentence):
        return "context"
    rules = (
        [("constraints", CONSTRAINT), ("decisions", DECISION), ("next", PLAN)]
        if from_user
        else [("decisions", DECISION), ("next", PLAN), ("progress", PROGRESS)]
    )
    for key, pattern in rules:
        if pattern.search(sentence):
            return key
    return "context"
