# Groups the records by category: count, sum, distinct users, the three commonest tags.
group_by(.category)
| map({
    category: .[0].category,
    n: length,
    total: (map(.amount) | add),
    users: (map(.user) | unique | length),
    top_tags: ([.[].tags[]] | group_by(.) | map({tag: .[0], n: length}) | sort_by(-.n, .tag) | .[:3])
  })
