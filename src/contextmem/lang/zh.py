"""Chinese: the tables the summariser, the date reader and the save-claim check read.

Chinese writes no spaces between words, so its cues match anywhere (``whole_words`` is off), it has no
stop words (its text is read as character bigrams) and no capitalisation.
"""

from __future__ import annotations

import re

from .language import DayPhrase, Language, PeriodPhrase, SummaryText
from .scripts import HAN, IDEOGRAPHS

__all__ = ["CHINESE", "DAY_PHRASES", "DIGITS", "NUMERALS", "PERIOD_PHRASES", "WEEKDAYS", "YESTERDAY"]

WEEKDAYS = (("一",), ("二",), ("三",), ("四",), ("五",), ("六",), ("日", "天"))
"""Per weekday, Monday first: the character after 周/星期/礼拜 (周日 and 周天 are both Sunday)."""
DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
"""The digit characters and their values (两 is the "two" of counting); 十 is ten."""
NUMERALS = "一二两三四五六七八九十"
"""The numeral characters up to ten (两 is the "two" of counting)."""
YESTERDAY = ("昨天", "昨日", "昨晚", "昨夜")

_WEEKDAY = "".join(name for names in WEEKDAYS for name in names)

# The grammar of a day relative to today (memory search's date reader).
_NUMBER = f"[{NUMERALS}]{{1,3}}"
_WEEK = "(?:周|星期|礼拜)"
_WEEKDAY_GROUP = f"(?P<weekday>[{_WEEKDAY}])"
_NUMERAL_BEFORE = rf"(?<![{NUMERALS}几\d:.])"  # "一周三次" is "three times a week"
DAY_PHRASES = (
    DayPhrase("大前天", "days", "大", days=3),
    DayPhrase("|".join(YESTERDAY), "days", "昨", days=1),
    # 之前天气 ("the weather before"), 提前天数: 前 belongs to the word before it, 天 to the one after.
    DayPhrase(
        "前天",
        "days",
        "前",
        "(?<![之以提目眼面空从事生当跟门年月日周往向超史])",
        "(?![气空然下才使堂真地生文性赋])",
        days=2,
    ),
    DayPhrase(
        rf"(?P<n>\d{{1,4}}|{_NUMBER})[天日][以之]?前",
        "days_ago",
        rf"\d{NUMERALS}",
        rf"(?<!月){_NUMERAL_BEFORE}",  # 三月十四日前: "before 14 March", not 14 days ago
        "(?![往进来去面后端台途景排列])",
    ),
    DayPhrase(
        rf"(?P<week>上上|上|这|本|下)(?:个)?{_WEEK}{_WEEKDAY_GROUP}",
        "weekday_of_week",
        "上这本下",
        after="(?![到至])",
    ),
    DayPhrase("(?P<week>上上|上)(?:个)?周末", "weekend", "上"),
    DayPhrase(rf"(?P<week>上上|上)(?:个)?{_WEEK}", "whole_week", "上", after="(?![期围边长游转报刊堂])"),
    DayPhrase(
        rf"{_WEEK}{_WEEKDAY_GROUP}",
        "last_weekday",
        "周星礼",
        rf"(?<![上下每这本个到至]){_NUMERAL_BEFORE}",
        "(?![到至~\\-—])",
        certain=False,
    ),
    DayPhrase("明天|明日|明晚", "days_ahead", "明", after="(?![香之])", days=1),  # 明日香 (a name), 明日之星
    DayPhrase(
        rf"(?:(?P<year>\d{{4}})\s*年\s*)?(?P<month>\d{{1,2}}|{_NUMBER})\s*月\s*(?P<day>\d{{1,2}}|{_NUMBER})\s*[日号]",
        "month_day",
        rf"\d{NUMERALS}",
        r"(?<![\d年])",  # 二〇二六年三月十四日: a year this does not read is not guessed
    ),
)
"""The days memory search reads relative to today: 昨天/昨日/昨晚 (today - 1), 前天 (- 2), 大前天 (- 3),
三天前 (三天以前, 3日之前 too), bare 周六/星期六/礼拜六 (the most recent one), 上周六/上星期六/上个周六 (the
previous ISO week's; 上上周六 the week before's, 这周六/本周六 this week's if before today), 上周/上上周
and 上周末 (those weeks), 3月14日 / 三月十四号 (a year may precede). Left alone: 今天, 下周一, 每周一,
周一到周五, 一周三次, 上个月, 几天前, 两三天前, 日前, 周到, 周期, 之前天气, 提前三天前往,
三月十四日前. Read as a date although it may not be one: 上周到北京 ("went to Beijing last week", rather
than 送上周到的服务). Only a memory note reads the days after today: 明天/明日/明晚 (+ 1), 下周六/下个星期六
(the next ISO week's); it leaves a bare 周六 alone (周六去爬山吧 is the next one). Left alone there too: 后天
(后天培养 is "acquired"), 这周六 before it has passed."""

_MONTH_AFTER = "(?![球亮光饼台份])"  # 登上月球, 月亮, 月光, 月饼, 月台, 以下月份: no month before or after
_YEAR_AFTER = "(?![轻纪龄代])"  # 以前年轻, 明年代: not a year
PERIOD_PHRASES = (
    PeriodPhrase(f"(?<![马早晚登爬])上个?月{_MONTH_AFTER}", "month", -1),
    PeriodPhrase(f"下个?月{_MONTH_AFTER}", "month", 1),
    PeriodPhrase(f"去年{_YEAR_AFTER}", "year", -1),
    PeriodPhrase(f"(?<![之以提目年从当])前年{_YEAR_AFTER}", "year", -2),
    PeriodPhrase(f"(?<![光])明年{_YEAR_AFTER}", "year", 1),
)
"""The months and years a memory note writes out: 上个月/上月, 下个月/下月, 去年, 前年, 明年. Left alone: 后年
(以后年纪大了), 这个月, 今年."""

CUES = {
    "constraint": r"不要|必须|需要|只能|禁止|不能|务必|应该|别|不得|至少|最多|确保|一定要|不允许",
    "progress": r"完成|修复|已经|实现了|添加了|通过|解决|部署了|更新了|创建了|删除了|改好",
    "decision": r"决定|选择|采用|改用|我们将|确定|就用|方案",
    "plan": r"接下来|下一步|待办|还需要|计划|打算|准备|之后|稍后|下周|下个月|明天|明年|报名|预约|订好",
    "preference": r"喜欢|最爱|偏爱|讨厌|爱吃|爱看|迷上|更喜欢|最喜欢|不喜欢",
    "error": r"错误|失败|异常|报错|超时|拒绝",
    "noted": r"记一下|记住|注意[：:]|备注|提醒一下|别忘了|重要[：:]",
    "request": r"请|帮我|帮忙|能不能|麻烦|你来",
    "command": r"^(?:看|查|跑|试|测|找|改)一下|^(?:看看|查查|把)|^(?:检查|确认|总结)(?![了过完：:])",
    # No tense: a completed action (了, but not after a verb of knowing, 我明白了, or a degree, 太好看了),
    # one of the verbs that tell one, a sentence that opens "I with / at / went to / took part in /
    # because / from" (我和…, 我在…, 我们去…), something done for the speaker (妈妈送给我…, 爷爷教我…) or
    # what made the speaker feel (…让我感到难过).
    "event": (
        r"^我们?(?:和|跟|与|在|去|到|参加|因为|从)|我们?[^，。！？,!?]{0,12}(?<!明白|知道|想好|记住|记得|不懂|懂得|决定)(?<![太真好]\w)了"
        r"|去了|买了|拿到|领养|搬到|参加了|认识了|获得|得到|赢了|收到|送了?给?我|教我|奖励了?我|带我去|让我(?:感到|觉得)"
    ),
    "advice": r"你可以试|你可以尝试|可以试着|或许你|也许你|你不妨|不妨试|试着|别担心|不要担心",
}

FILLERS = (
    # Interjections and openers (对了 "oh right": 15 of MADial-Bench's 770 Chinese user lines; 其实: 7).
    r"^(?:哈哈+|嗯+|啊+|哇+|哦+|噢+|唉+|对了|话说|其实|说实话|好吧)[，,！!。…~\s]*",
    # A lead-in that announces news: 你知道吗 (16 of MADial-Bench's 770 Chinese user lines), 跟你说,
    # 告诉你一件事, 告诉你个好消息, 猜猜怎么着 ("guess what"; chat, game dialogue and blog text in public
    # GitHub repositories). Not 跟你说件事 / 说件事: our MADial generator's one lead-in, in neither.
    r"^(?:告诉你一件事|告诉你个好消息|跟你说|你知道吗|猜猜怎么着)[，,：:！!？?。…~\s]+",
    r"^(?:早上好|早安|上午好|下午好|晚上好|你好|您好|大家好)[，,！!。…~\s]*",
    r"^(?:哈喽|哈啰|嗨)+(?:[，,！!。…~\s]+|$)",  # 嗨皮 ("happy") is no greeting
)

LOG_CUES = (
    # 错误 / 失败 / 异常 / 报错: what Chinese application logs write for error, failure, exception and
    # "reported an error"; also the zh_CN messages of git ("错误：", "致命错误："), glibc and bash ("段错误",
    # Segmentation fault) and PostgreSQL ("错误:  关系 … 不存在").
    r"错误|失败|异常|报错",
    # 致命 (fatal: git's "致命错误："), 崩溃 (crashed), 无法 (cannot: apt's "无法下载", ls's "无法访问").
    r"致命|崩溃|无法",
    # glibc's zh_CN messages of a failed call: Permission denied, No such file or directory, Connection
    # refused, Killed, Cannot allocate memory (无法分配内存 is matched by 无法), and "out of memory".
    r"权限不够|没有那个文件或目录|拒绝连接|已杀死|内存不足",
)

CHINESE = Language(
    code="zh",
    cues=CUES,
    log_cues=LOG_CUES,
    fillers=FILLERS,
    laughter=r"(?<![\s,，])[\s,，]*哈哈+[！!。]*",
    weekdays=WEEKDAYS,
    day_phrases=DAY_PHRASES,
    number_words=DIGITS,
    tens_word="十",
    tens_digits={name: value for name, value in DIGITS.items() if name != "两"},  # 两 counts, alone
    weeks_back={"上上": 2, "上": 1, "这": 0, "本": 0, "下": -1},
    period_phrases=PERIOD_PHRASES,
    month_spelling="{y}年{m}月",
    year_spelling="{y}年",
    written_dates=(r"(?<!\d)(?P<year>\d{4})\s*年\s*(?P<month>\d{1,2})\s*月\s*(?P<day>\d{1,2})\s*[日号]",),
    written_months=(rf"(?<!\d)(?P<year>\d{{4}})\s*年\s*(?P<month>\d{{1,2}}|{_NUMBER})\s*月",),
    date_spellings=(r"{y}年0?{m}月0?{d}[日号]",),
    dates=(r"\d{4}年\d{1,2}月\d{1,2}日",),
    partial_dates=(
        r"\d{1,2}月\d{1,2}[日号]",
        rf"[上下这本]周[{_WEEKDAY}]",
        r"[一二三四五六七八九十]{1,2}月",
        r"\d{1,2}月",
        r"今年|去年|明年|昨天|前天|周末",
    ),
    time_phrases=(
        r"今天|明天|后天|前年|这周|本周|[上下](?:个)?(?:周|星期|礼拜|月)|这个月|最近|刚才|以前|之前|早上|上午|中午"
        r"|下午|晚上|凌晨",
        rf"(?:星期|礼拜|周)[{_WEEKDAY}]",
        # Read from the start of a number only, and a number of six characters at most: a long run of
        # digits is not tried again from each of its characters.
        rf"(?<![\d{NUMERALS}])[\d{NUMERALS}]{{1,6}}\s{{0,3}}(?:年|月|日|号|天前|周前)",
    ),
    when_questions=(r"什么时候|何时|哪一?天|哪一?年|哪个月|几月|几号|几时|多久以前|多久之前",),
    numbers=rf"[{NUMERALS}百千万]+(?:个|岁|公里|次|元|块|年|天|楼|本|只|张)",
    quotes=r"《[^》]{1,30}》|「[^」]{1,30}」",
    sentence_end=r"(?<=[。！？；])",
    clause_end=r"[，；]\s*",
    question_mark="？",
    sentence_marks="。！？",
    clause_marks="，；",
    full_stop="。",
    speaker_name=rf"[{HAN}]{{1,4}}",
    save_claim=re.compile(
        r"(?:已|已经|我会|我将|我已|会|将)(?:经)?(?:帮你|为你|替你|帮您|为您)?"
        r"(?:保存|存储|储存|记录|记下|记住|写入|存入|存好|记好)"
        r"|(?:保存|存储|记录|记|写入|存)(?:到|在|进|入)了?[^。！\n]{0,12}(?:记忆|备忘)"
    ),
    not_saved_note="（未保存：本轮没有调用 memory_write）",
    letters=IDEOGRAPHS,
    letter_share=0.2,  # low: a Chinese sentence about code carries many Latin letters (请修改src/auth.ts)
    summary=SummaryText(
        sections={
            "goal": "目标",
            "constraints": "约束",
            "progress": "进展",
            "decisions": "关键决策",
            "next": "下一步",
            "context": "关键上下文",
        },
        hints={
            "goal": "用户想要达成什么",
            "constraints": "要求、限制和禁止做的事",
            "progress": "已完成的工作和发现，以及结果",
            "decisions": "做出的选择及原因",
            "next": "还要做什么",
            "context": "继续工作所需的准确错误信息、路径、数值和事实",
        },
        hint="（{}）",
        none="（无）",
        none_items=frozenset({"（无）", "无"}),
        none_replies=frozenset({"(无)", "无。"}),
        label_sep="：",
        joiner="",
        earlier="此前：",
        system="""你负责维护用户与 AI 助手之间长对话的记忆。你从不与用户对话，只输出记忆文档本身。

你会收到新的对话内容、已记录的关键标识，以及一份由早先记忆和新对话自动生成的新记忆草稿。请修订草稿：
- 删除被新对话推翻或已过时的条目（数值变了、计划已完成或取消）：只保留最新的说法。
- 把意思相同的条目合并为一条。
- 补充新对话中草稿遗漏的重要内容：决定、结果、偏好、计划。
- 精简啰嗦的条目，但人名、数字、日期、文件路径、编号和错误信息必须逐字照抄，不得改写。
- 草稿中的其他条目全部保留。
- 用中文简洁地分条书写，使用模板中的六个标题，并保持顺序。
- 只输出填好的模板：不要问候、不要开场白、不要结尾语。总长度不超过 {budget} 个 token。""",
        prompt_labels={
            "new": "新的对话内容：",
            "ledger": "已记录的关键标识（另行保存；使用时请逐字照抄）：",
            "draft": "新记忆的草稿（每行一条事实，标明所属部分）：",
            "empty": "（空）",
            "extra": "用户对本次总结的额外要求：",
            "fill": "现在写出修订后的记忆。请填写下面的模板，"
            "把每个 ... 替换为来自草稿、并按新对话修订过的要点，六个部分都要写：",
        },
        title="早期对话摘要：",
        archive="已归档的原始消息（可用 read_file(path) 读取全文）：",
        ledger_title="关键标识（原样保留）：",
        ledger_labels={
            "path": "路径",
            "url": "链接",
            "host": "主机",
            "email": "邮箱",
            "error": "错误",
            "id": "编号",
            "number": "数值",
            "name": "名称",
        },
        error_words="状态码|退出码",
        units="行|条|个|秒|毫秒|分钟|小时|天|次|元|万|亿|倍",
        chatty="好的|当然|没问题|以下是|下面是|你好|您好|很高兴",
        closer="希望.*帮助|如需|如果您?还?需要",
    ),
)
