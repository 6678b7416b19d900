# ruff: noqa: E501  (dialogue lines read whole)
"""The scene a new user tried (issue 46): a Kyoto trip, then a dripping kitchen tap, then a
new laptop; 16 messages, two switches (at messages 7 and 11), in English, French and German.
The assistant's replies are what a model answers, a few sentences each."""

KYOTO_TAP_LAPTOP = {
    "en": [
        ("user", "Going to Kyoto in April for five days. Which temples should I not miss?"),
        (
            "assistant",
            "Kiyomizu-dera, Fushimi Inari and Kinkaku-ji are the classics; go early in the morning to beat the crowds. Ginkaku-ji and the Philosopher's Path are lovely in cherry blossom season.",
        ),
        ("user", "Is the JR Pass worth it if we also visit Nara and Osaka?"),
        (
            "assistant",
            "For Kyoto, Nara and Osaka alone the JR Pass rarely pays off: the local trains are cheap. Buy single tickets or an ICOCA card unless you also ride the shinkansen from Tokyo and back.",
        ),
        ("user", "Where should we stay, Gion or near Kyoto Station?"),
        (
            "assistant",
            "Gion is charming and walkable in the evening; Kyoto Station is practical for day trips to Nara and Osaka. With five days, a hotel near Shijo gives you a bit of both.",
        ),
        (
            "user",
            "Unrelated, but my kitchen tap keeps dripping even when it's closed tight. What's the usual cause?",
        ),
        (
            "assistant",
            "A tap that drips when closed usually has a worn washer or a worn ceramic cartridge. Turn off the water under the sink, take off the handle and check which type you have.",
        ),
        ("user", "It's a single-lever mixer. Can I replace the cartridge myself?"),
        (
            "assistant",
            "Yes: shut off both supply valves, remove the lever and the retaining nut, pull the old cartridge and take it to the shop to match the size. Fit the new one and tighten gently.",
        ),
        (
            "user",
            "Completely different thing: I need to choose a new laptop for work, around 1,500 euros.",
        ),
        (
            "assistant",
            "At that budget look at a MacBook Air with 16 GB, a ThinkPad T14 or a Dell XPS 13. Tell me what software you run and how much battery life matters.",
        ),
        ("user", "Battery life matters most, I run Docker and VS Code all day."),
        (
            "assistant",
            "Then an Apple silicon MacBook Air or Pro is hard to beat on battery, and Docker runs well on it. On Windows, a ThinkPad T14 with an AMD processor lasts a full working day.",
        ),
        ("user", "Is 16 GB of RAM enough for Docker, or should I get 32?"),
        (
            "assistant",
            "16 GB is enough for a few containers and an editor; if you run databases and several services at once, 32 GB gives you headroom for the next five years.",
        ),
    ],
    "fr": [
        (
            "user",
            "Je pars à Kyoto en avril pour cinq jours. Quels temples ne faut-il pas manquer ?",
        ),
        (
            "assistant",
            "Kiyomizu-dera, Fushimi Inari et le Kinkaku-ji sont les classiques ; allez-y tôt le matin pour éviter la foule. Le Ginkaku-ji et le chemin de la Philosophie sont superbes pendant la floraison des cerisiers.",
        ),
        ("user", "Le JR Pass vaut-il le coup si nous visitons aussi Nara et Osaka ?"),
        (
            "assistant",
            "Pour Kyoto, Nara et Osaka seulement, le JR Pass est rarement rentable : les trains locaux sont bon marché. Prenez des billets simples ou une carte ICOCA, sauf si vous faites aussi l'aller-retour en shinkansen depuis Tokyo.",
        ),
        ("user", "Où loger, à Gion ou près de la gare de Kyoto ?"),
        (
            "assistant",
            "Gion est charmant et agréable à pied le soir ; la gare de Kyoto est pratique pour les excursions à Nara et Osaka. Pour cinq jours, un hôtel vers Shijo offre un peu des deux.",
        ),
        (
            "user",
            "Rien à voir, mais mon robinet de cuisine goutte même bien fermé. Quelle est la cause habituelle ?",
        ),
        (
            "assistant",
            "Un robinet qui goutte fermé a généralement un joint usé ou une cartouche céramique usée. Coupez l'eau sous l'évier, démontez la manette et regardez quel modèle vous avez.",
        ),
        ("user", "C'est un mitigeur à levier unique. Puis-je changer la cartouche moi-même ?"),
        (
            "assistant",
            "Oui : fermez les deux robinets d'arrivée, retirez le levier et l'écrou, sortez l'ancienne cartouche et apportez-la au magasin pour avoir la bonne taille. Posez la nouvelle et serrez doucement.",
        ),
        (
            "user",
            "Tout autre chose : je dois choisir un nouvel ordinateur portable pour le travail, autour de 1 500 euros.",
        ),
        (
            "assistant",
            "À ce prix, regardez un MacBook Air avec 16 Go, un ThinkPad T14 ou un Dell XPS 13. Dites-moi quels logiciels vous utilisez et si l'autonomie compte beaucoup.",
        ),
        ("user", "L'autonomie compte le plus, j'utilise Docker et VS Code toute la journée."),
        (
            "assistant",
            "Alors un MacBook Air ou Pro à puce Apple est imbattable en autonomie, et Docker y tourne bien. Sous Windows, un ThinkPad T14 avec processeur AMD tient une journée de travail.",
        ),
        ("user", "16 Go de RAM suffisent-ils pour Docker, ou faut-il 32 ?"),
        (
            "assistant",
            "16 Go suffisent pour quelques conteneurs et un éditeur ; si vous lancez des bases de données et plusieurs services à la fois, 32 Go vous donnent de la marge pour cinq ans.",
        ),
    ],
    "de": [
        (
            "user",
            "Ich fahre im April für fünf Tage nach Kyoto. Welche Tempel sollte ich nicht verpassen?",
        ),
        (
            "assistant",
            "Kiyomizu-dera, Fushimi Inari und Kinkaku-ji sind die Klassiker; gehen Sie früh am Morgen hin, um den Massen zu entgehen. Ginkaku-ji und der Philosophenweg sind zur Kirschblüte wunderschön.",
        ),
        ("user", "Lohnt sich der JR Pass, wenn wir auch Nara und Osaka besuchen?"),
        (
            "assistant",
            "Nur für Kyoto, Nara und Osaka lohnt sich der JR Pass selten: die Nahverkehrszüge sind günstig. Kaufen Sie Einzeltickets oder eine ICOCA-Karte, außer Sie fahren auch mit dem Shinkansen von Tokio hin und zurück.",
        ),
        ("user", "Wo sollen wir übernachten, in Gion oder am Bahnhof Kyoto?"),
        (
            "assistant",
            "Gion ist charmant und abends schön zu Fuß; der Bahnhof Kyoto ist praktisch für Ausflüge nach Nara und Osaka. Bei fünf Tagen bietet ein Hotel bei Shijo etwas von beidem.",
        ),
        (
            "user",
            "Ganz was anderes: mein Küchenwasserhahn tropft, selbst wenn er fest zugedreht ist. Was ist die übliche Ursache?",
        ),
        (
            "assistant",
            "Ein Hahn, der geschlossen tropft, hat meist eine verschlissene Dichtung oder eine abgenutzte Keramikkartusche. Drehen Sie das Wasser unter der Spüle ab, nehmen Sie den Griff ab und sehen Sie nach, welchen Typ Sie haben.",
        ),
        ("user", "Es ist ein Einhebelmischer. Kann ich die Kartusche selbst tauschen?"),
        (
            "assistant",
            "Ja: schließen Sie beide Eckventile, entfernen Sie den Hebel und die Überwurfmutter, ziehen Sie die alte Kartusche heraus und nehmen Sie sie in den Baumarkt mit, damit die Größe passt. Setzen Sie die neue ein und ziehen Sie vorsichtig an.",
        ),
        (
            "user",
            "Etwas völlig anderes: ich muss einen neuen Laptop für die Arbeit aussuchen, um die 1.500 Euro.",
        ),
        (
            "assistant",
            "In dem Budget lohnen sich ein MacBook Air mit 16 GB, ein ThinkPad T14 oder ein Dell XPS 13. Sagen Sie mir, welche Software Sie nutzen und wie wichtig die Akkulaufzeit ist.",
        ),
        (
            "user",
            "Die Akkulaufzeit ist am wichtigsten, ich nutze den ganzen Tag Docker und VS Code.",
        ),
        (
            "assistant",
            "Dann ist ein MacBook Air oder Pro mit Apple-Chip bei der Akkulaufzeit kaum zu schlagen, und Docker läuft gut darauf. Unter Windows hält ein ThinkPad T14 mit AMD-Prozessor einen Arbeitstag durch.",
        ),
        ("user", "Reichen 16 GB RAM für Docker, oder sollte ich 32 nehmen?"),
        (
            "assistant",
            "16 GB reichen für ein paar Container und einen Editor; wenn Sie Datenbanken und mehrere Dienste gleichzeitig laufen lassen, geben Ihnen 32 GB Reserven für die nächsten fünf Jahre.",
        ),
    ],
}

#: One subject over 20 messages (a Kyoto trip): it must never fork, and its title settles.
KYOTO_LONG = [
    ("user", "Going to Kyoto in April for five days with my partner. Where do we start?"),
    ("assistant", "Start with the temples of Higashiyama and plan one day trip to Nara."),
    ("user", "Which temples in Kyoto are the most beautiful in April?"),
    ("assistant", "Kiyomizu-dera, Heian Shrine and Daigo-ji are famous for cherry blossoms."),
    ("user", "Is Fushimi Inari very crowded in the morning?"),
    ("assistant", "Before eight it is quiet; the upper gates stay calm all day."),
    ("user", "Should we book a ryokan in Kyoto for one night?"),
    ("assistant", "One ryokan night with a kaiseki dinner is a highlight of a Kyoto trip."),
    ("user", "How much does a ryokan night in Kyoto cost for two?"),
    ("assistant", "Expect 40,000 to 80,000 yen for two with dinner and breakfast."),
    ("user", "Can we see geishas in Gion in the evening in Kyoto?"),
    ("assistant", "Around Hanamikoji at dusk you may see maiko walking to appointments."),
    ("user", "Which Kyoto day trip is better, Nara or Arashiyama?"),
    ("assistant", "Nara for the deer and Todai-ji; Arashiyama for the bamboo grove."),
    ("user", "Do we need cash for the temples in Kyoto?"),
    ("assistant", "Many Kyoto temples take cash only for the entrance fee; carry yen."),
    ("user", "What should we eat in Kyoto, any dish we must try?"),
    ("assistant", "Try yudofu, matcha sweets in Uji and the Nishiki market's pickles."),
    ("user", "How do we get from Kyoto Station to our hotel in Gion?"),
    ("assistant", "Take the bus 206 or a taxi; with luggage a taxi costs about 2,000 yen."),
]
